"""What the door knows of an MCP client by the `clientInfo` of its `initialize`.

One thing so far: whether it caches the image and audio blocks it receives and writes its own
`MEDIA:` line for each (hermes-agent does), so that our line under a block sent as such would
be a second one for the same medium (`SentMediaTag.AUTO`). Only a client that names itself
can be told: a wrong guess would take the only path line from a client that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.rewrite import SentMediaTag


@dataclass(frozen=True, slots=True)
class ClientName:
    name: str
    version: str


# A client whose name starts so writes its own `MEDIA:` line for each image and audio block.
# hermes-agent 0.19 does not name itself: it sends the MCP Python SDK's default clientInfo
# (`mcp` 0.1.0), as every client of that SDK (1.x and 2.x) that leaves it unset does, so it
# cannot be told apart and gets `MCP__SENT_MEDIA_TAG=omit` in its server's `env:` instead.
_TAGS_ITS_OWN_PREFIXES = ("hermes",)


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
    return client is not None and client.name.lower().startswith(_TAGS_ITS_OWN_PREFIXES)


def tag_sent(setting: SentMediaTag, client: ClientName | None) -> bool:
    """Whether our `MEDIA:` line goes under a block `client` receives as such."""
    match setting:
        case SentMediaTag.ALWAYS:
            return True
        case SentMediaTag.OMIT:
            return False
        case _:
            return not tags_media_itself(client)
