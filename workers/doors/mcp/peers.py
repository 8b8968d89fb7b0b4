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
be asked anything. Over stdio there is one client: its requests share one set of upstream
sessions. Over HTTP nothing tells two clients apart (no session id; the bearer token is the
door's), so each request is its own client session (`RequestPeers`): it gets upstream
sessions of its own, held until the request and any task it started have ended, then
stopped; a `subscriptions/listen` stream holds its own for as long as it is open and hears
their changes only. What an upstream keeps per session therefore lasts one request: no
client sees another's. Starting a stdio upstream per request is slow, so `MCP__SPARE_SESSIONS`
sets are kept started ahead (each used by one request); `MCP__MODERN_SESSIONS=shared` gives
all 2026 requests over HTTP one set instead, for upstreams that keep no per-session state.
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from workers.core.door_settings import McpSettings
from workers.doors.mcp.upstream import Upstream, UpstreamSpec
from workers.doors.mcp.upstream_process import Prestarted

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


def http_request(ctx: Any) -> Connection | None:
    """The connection of a 2026-07-28 request over HTTP, which is that request alone (no
    session, no channel back), else None. Over stdio the modern connection has the pipe (one
    client); an in-process client has no HTTP request."""
    connection = connection_of(ctx)
    if (
        connection is None
        or not is_modern(connection)
        or connection.has_standalone_channel
        or getattr(ctx, "request", None) is None
    ):
        return None
    return connection


class Peer:
    """One client connection (None: the stdio 2026 client; a 2026 request over HTTP is one
    too) and its sessions with the upstreams. What the upstreams send a 2026 client goes to
    `publish`, or, without one, to this peer's own `events` (a listen stream's)."""

    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        limits: McpSettings,
        connection: Connection | None,
        publish: Publish | None,
        changed: Changed,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.connection = connection
        self.events: InMemorySubscriptionBus | None = None
        if publish is None:
            self.events = InMemorySubscriptionBus()
            publish = self.events.publish
        self._publish = publish
        self._changed = changed
        self.upstreams = {
            spec.name: Upstream(spec, self._message, limits, self.client_callbacks(), prestarted)
            for spec in specs
        }
        self.tool_names: dict[str, frozenset[str]] = {}  # each upstream's, as last listed
        self.resource_owner: dict[str, str] = {}  # resource and template URIs: their upstream
        self.listened: Counter[str] = Counter()  # resources subscribed by listen streams
        self.holders: set[object] = set()  # its request and the tasks using it (RequestPeers)
        self._started = False
        self.warmed = False  # a spare's sessions have been started (`warm`)
        self._running = anyio.Event()  # its slot is held (or it was stopped waiting)
        self._waiting = anyio.CancelScope()

    def start(self, tasks: anyio.abc.TaskGroup, slots: anyio.CapacityLimiter | None = None) -> None:
        """Run the upstream sessions in `tasks`; with `slots`, once one is free (held until
        they have all ended), so at most that many peers have upstreams running."""
        if slots is not None:
            tasks.start_soon(self._run_in_slot, slots)
            return
        self._started = True
        self._running.set()
        for upstream in self.upstreams.values():
            tasks.start_soon(upstream.run)

    async def _run_in_slot(self, slots: anyio.CapacityLimiter) -> None:
        if slots.available_tokens < 1:  # what a call waiting for its upstream is told
            reason = (
                f"all {slots.total_tokens:g} upstream session slots for 2026-07-28 requests over "
                "HTTP are in use (MCP_MEDIA_MCP__MAX_SESSIONS); retry when some have finished"
            )
            for upstream in self.upstreams.values():
                upstream.error = reason
        acquired = False
        with self._waiting:  # cancelled by `stop`
            await slots.acquire_on_behalf_of(self)
            acquired = True
        if not acquired:
            return
        try:
            self._started = True
            self._running.set()
            async with anyio.create_task_group() as runs:
                for upstream in self.upstreams.values():
                    upstream.error = None
                    runs.start_soon(upstream.run)
        finally:
            slots.release_on_behalf_of(self)

    async def warm(self) -> None:
        """Start every upstream session now (a spare's); `warmed` once each has started or
        failed to."""
        try:
            await self._running.wait()  # a slot first: waiting for one is not failing
            for upstream in self.upstreams.values():
                with suppress(Exception):  # the reason stays in `upstream.error`
                    await upstream.session()
        finally:
            self.warmed = True

    @property
    def dead(self) -> bool:
        """Warmed, but some upstream session did not start or has ended since."""
        return self.warmed and not all(u.live for u in self.upstreams.values())

    def stop(self) -> None:
        self._waiting.cancel()
        self._running.set()
        for upstream in self.upstreams.values():
            upstream.stop()

    async def close(self) -> None:
        """Stop every upstream session and wait until each has ended (its process too)."""
        self.stop()
        if not self._started:
            return  # still waiting for a slot: nothing ran
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
        if self.connection is None or is_modern(self.connection):
            event = _RELAYED[method]
            if event is not None:
                await self._publish(event(dumped))
            return
        await self.connection.notify(method, dumped or None)


def _dump(params: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


class RequestPeers:
    """The upstream sessions of 2026-07-28 requests over HTTP: each request's own, started on
    its first use and stopped once the request has been answered and every other task that
    used it (a task's call that outlives the request) has ended. At most `limit` requests
    have upstreams running; the next waits for one to end (a call gives up after the
    upstream's connect timeout, with the reason).

    From the first request on, `spares` sets are kept started ahead (each holding one of the
    `limit` slots): a request takes one (a ready one first, else one still starting) instead
    of starting its own, and a replacement starts in the background. A spare is used by one
    request only, and one whose upstream did not start or has died is stopped, not handed
    out."""

    def __init__(
        self, start: Callable[[Connection | None], Peer], limit: int, spares: int = 0
    ) -> None:
        self._start = start
        self.slots = anyio.CapacityLimiter(limit)
        self.live: dict[Connection, Peer] = {}
        self.closing: set[Peer] = set()
        self.spares: list[Peer] = []
        self._spare_count = min(spares, limit)
        self._group: anyio.abc.TaskGroup | None = None
        self._stopped = False
        self._answered: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._ended, self._to_close = anyio.create_memory_object_stream[Peer](math.inf)

    def peers(self) -> list[Peer]:
        return [*self.live.values(), *self.closing, *self.spares]

    def stop(self) -> None:
        """No more spares are started (the proxy is stopping)."""
        self._stopped = True

    def peer(self, connection: Connection) -> Peer:
        peer = self.live.get(connection)
        if peer is None:
            peer = self.live[connection] = self._take(connection)
            if connection not in self._answered:
                peer.holders.add(connection)
                connection.exit_stack.push_async_callback(self._answer, connection, peer)
        task = asyncio.current_task()
        if task is not None and task not in peer.holders:
            peer.holders.add(task)
            task.add_done_callback(lambda done: self._release(connection, peer, done))
        return peer

    def _take(self, connection: Connection) -> Peer:
        """A spare for this request (a ready one first), else sessions of its own; then the
        spares are made up again."""
        for dead in [spare for spare in self.spares if spare.dead]:
            self.spares.remove(dead)
            self._retire(dead)
        ready = [spare for spare in self.spares if spare.warmed]
        if ready or self.spares:
            peer = (ready or self.spares)[0]
            self.spares.remove(peer)
            peer.connection = connection
        else:
            peer = self._start(connection)
        self._make_spares()
        return peer

    def _make_spares(self) -> None:
        while self._group is not None and not self._stopped:
            if len(self.spares) >= self._spare_count:
                return
            spare = self._start(None)
            self.spares.append(spare)
            self._group.start_soon(spare.warm)

    async def _answer(self, connection: Connection, peer: Peer) -> None:
        """The request is answered (its connection closes, in the task that served it):
        that task and the request no longer hold the peer."""
        self._answered.add(connection)
        peer.holders.discard(asyncio.current_task())
        self._release(connection, peer, connection)

    def _release(self, connection: Connection, peer: Peer, holder: object) -> None:
        peer.holders.discard(holder)
        if peer.holders or self.live.get(connection) is not peer:
            return
        del self.live[connection]
        self._retire(peer)

    def _retire(self, peer: Peer) -> None:
        self.closing.add(peer)
        with suppress(anyio.ClosedResourceError):  # after `reap`: the proxy closes it
            self._ended.send_nowait(peer)  # from a done callback too: closed in `reap`

    async def reap(self, tasks: anyio.abc.TaskGroup) -> None:
        """Stops the sessions of ended requests (in `tasks`), for as long as the proxy runs."""
        self._group = tasks
        with self._ended, self._to_close:
            async for peer in self._to_close:
                tasks.start_soon(self._close, peer)

    async def _close(self, peer: Peer) -> None:
        try:
            await peer.close()
        finally:
            self.closing.discard(peer)
