"""What the door knows of an MCP client by the `clientInfo` of its `initialize`.

One thing so far: whether it caches the image and audio blocks it receives and writes its own
`MEDIA:` line for each (hermes-agent does, in tools/mcp_tool.py), so that our line under a
block sent as such would be a second one for the same medium (`SentMediaTag.AUTO`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.rewrite import SentMediaTag


@dataclass(frozen=True, slots=True)
class ClientName:
    name: str
    version: str


# hermes-agent (0.19) does not name itself: it sends the MCP Python SDK's default clientInfo.
# Other clients of that SDK that leave it unset send it too; they lose only our path line
# under a block they receive whole (its summary stays), and MCP__SENT_MEDIA_TAG=always
# brings it back.
_TAGS_ITS_OWN = frozenset({ClientName("mcp", "0.1.0")})
_TAGS_ITS_OWN_PREFIXES = ("hermes",)  # should a later hermes name itself


def client_named(connection: Any) -> ClientName | None:
    """The client on an SDK `Connection` (`peers.connection_of`), as its `initialize` (or
    its 2026 envelope) named it; None if it did not. No MCP SDK import here: the CLI loads
    this module before the upstreams start."""
    params = getattr(connection, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is None:
        return None
    return ClientName(str(info.name), str(info.version))


def tags_media_itself(client: ClientName | None) -> bool:
    """Whether `client` writes its own `MEDIA:` line for each image or audio block."""
    if client is None:
        return False
    return client in _TAGS_ITS_OWN or client.name.lower().startswith(_TAGS_ITS_OWN_PREFIXES)


def tag_sent(setting: SentMediaTag, client: ClientName | None) -> bool:
    """Whether our `MEDIA:` line goes under a block `client` receives as such."""
    match setting:
        case SentMediaTag.ALWAYS:
            return True
        case SentMediaTag.OMIT:
            return False
        case _:
            return not tags_media_itself(client)
