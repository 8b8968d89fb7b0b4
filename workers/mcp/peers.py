"""Each client connection's own upstream sessions, and the way back to that client.

A handshake-era client connection (the stdio one, or one HTTP session) gets its own session
with every upstream, started on first use and stopped when the connection closes: what an
upstream keeps per session (subscriptions, a log level, a session resource) is that
client's alone. The upstream client declares what the downstream client declared
(sampling, elicitation, roots), so an upstream shows the same tools through the proxy as
directly; what the upstream then asks (`sampling/createMessage`, `elicitation/create`,
`roots/list`) is asked of that client, and what it sends (log messages, list changes,
resource updates) reaches that connection once.

2026-07-28 clients have no connection (every request carries its own envelope) and cannot
be asked anything: they share one set of upstream sessions, whose changes reach their
`subscriptions/listen` streams.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from workers.mcp.upstream import Upstream, UpstreamSpec
from workers.settings import McpSettings

log = logging.getLogger("mcp_media.proxy")

CLOSE_TIMEOUT = 5.0  # a connection's upstreams are waited for this long when it closes

# Upstream notifications relayed to the client, and the event a 2026 client's stream gets.
_RELAYED: dict[str, Callable[[Mapping[str, Any]], ServerEvent] | None] = {
    "notifications/tools/list_changed": lambda _: ToolsListChanged(),
    "notifications/resources/list_changed": lambda _: ResourcesListChanged(),
    "notifications/prompts/list_changed": lambda _: PromptsListChanged(),
    "notifications/resources/updated": lambda p: ResourceUpdated(uri=str(p.get("uri", ""))),
    "notifications/message": None,  # log messages: handshake-era connections only
}

Publish = Callable[[ServerEvent], Awaitable[None]]
Changed = Callable[["Peer", str, str], None]  # peer, upstream name, method


def connection_of(ctx: Any) -> Connection | None:
    """The client connection a request came on (the SDK 2.3 keeps it on the per-request
    session only, as `_connection`)."""
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    return connection if isinstance(connection, Connection) else None


def is_modern(connection: Connection | None) -> bool:
    return connection is None or connection.protocol_version in MODERN_PROTOCOL_VERSIONS


class Peer:
    """One client connection (None: the 2026 clients) and its sessions with the upstreams."""

    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        limits: McpSettings,
        connection: Connection | None,
        publish: Publish,
        changed: Changed,
    ) -> None:
        self.connection = connection
        self._publish = publish
        self._changed = changed
        self.upstreams = {
            spec.name: Upstream(spec, self._message, limits, self.client_callbacks())
            for spec in specs
        }
        self.tool_names: dict[str, frozenset[str]] = {}  # each upstream's, as last listed
        self.resource_owner: dict[str, str] = {}  # resource and template URIs: their upstream

    def start(self, tasks: anyio.abc.TaskGroup) -> None:
        for upstream in self.upstreams.values():
            tasks.start_soon(upstream.run)

    def stop(self) -> None:
        for upstream in self.upstreams.values():
            upstream.stop()

    async def close(self) -> None:
        """Stop every upstream session and wait until each has ended (its process too)."""
        self.stop()
        with anyio.move_on_after(CLOSE_TIMEOUT):
            for upstream in self.upstreams.values():
                await upstream.finished()

    # what the upstream may ask

    def client_callbacks(self) -> dict[str, Any]:
        """The Client callbacks that declare (to the upstream) what the client declared."""
        declared = self.connection.client_capabilities if self.connection else None
        callbacks: dict[str, Any] = {"logging_callback": self._log}
        if declared is None or is_modern(self.connection):
            return callbacks
        if declared.sampling is not None:
            callbacks["sampling_callback"] = self._sampling
            callbacks["sampling_capabilities"] = declared.sampling
        if declared.elicitation is not None:
            callbacks["elicitation_callback"] = self._elicitation
        if declared.roots is not None:
            callbacks["list_roots_callback"] = self._roots
        return callbacks

    async def _sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        tools = params.tools is not None or params.tool_choice is not None
        shape = types.CreateMessageResultWithTools if tools else types.CreateMessageResult
        return await self._ask("sampling/createMessage", params, shape)

    async def _elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        # The SDK's client declares both modes; the client behind us may take only one.
        mode = "url" if isinstance(params, types.ElicitRequestURLParams) else "form"
        if not self._takes_elicitation(mode):
            return types.ErrorData(
                code=types.INVALID_PARAMS,
                message=f"the client did not declare {mode} elicitation",
            )
        return await self._ask("elicitation/create", params, types.ElicitResult)

    def _takes_elicitation(self, mode: str) -> bool:
        declared = self.connection.client_capabilities if self.connection else None
        elicitation = declared.elicitation if declared else None
        if elicitation is None:
            return False
        if elicitation.form is None and elicitation.url is None:
            return mode == "form"  # an empty declaration means form (the spec's default)
        return (elicitation.url if mode == "url" else elicitation.form) is not None

    async def _roots(self, context: Any) -> Any:
        return await self._ask("roots/list", None, types.ListRootsResult)

    async def _ask(self, method: str, params: Any, shape: type[Any]) -> Any:
        """The upstream's request, asked of the client; its answer or error goes back."""
        assert self.connection is not None
        raw = None if params is None else _dump(params)
        try:
            answer = await self.connection.send_raw_request(method, raw)
            return shape.model_validate(answer, by_name=False)
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # no back channel, a malformed answer, a client gone
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"the client could not be asked {method}: {exc}"
            )

    # what the upstream sends

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.connection is not None and not is_modern(self.connection):
            await self.connection.notify("notifications/message", _dump(params))

    async def _message(self, name: str, message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        if method not in _RELAYED or method == "notifications/message":
            return  # log messages come through `_log`
        params = getattr(root, "params", None)
        dumped = _dump(params) if params is not None else {}
        self._changed(self, name, method)
        if self.connection is None:
            event = _RELAYED[method]
            if event is not None:
                await self._publish(event(dumped))
            return
        await self.connection.notify(method, dumped or None)


def _dump(params: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped
