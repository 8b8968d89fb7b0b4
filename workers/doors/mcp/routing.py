"""Which upstream session answers a client's request, for `workers.doors.mcp.proxy`.

Each client connection has its own upstream sessions (`workers.doors.mcp.peers`), started on
its first request; a tool or prompt reaches its upstream by its public name
(`<server>__<name>` when there is more than one upstream), a resource by the upstream that
listed it. The calls made here notice an upstream gone, so the next call starts it again.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from workers.core.door_settings import McpSettings
from workers.doors.mcp.early_answers import MAX_PAGES, SEPARATOR
from workers.doors.mcp.peers import Peer, RequestPeers, connection_of, http_request, is_modern
from workers.doors.mcp.upstream import Upstream, UpstreamDown, UpstreamSpec
from workers.doors.mcp.upstream_process import Prestarted

log = logging.getLogger("mcp_media.proxy")
T = TypeVar("T")


class Router:
    """The upstream sessions of every client connection, and the way to the one a request
    names."""

    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        limits: McpSettings,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.specs = tuple(specs)
        self.limits = limits
        # The stdio upstreams started ahead, for the first client connection's sessions.
        self._prestarted = prestarted or Prestarted()
        self.prefixed = len(self.specs) > 1
        # Each client connection's upstream sessions (`peers`): the stdio 2026 client's is
        # `_modern`, and a 2026 request over HTTP has its own (`_requests`).
        self._peers: dict[Connection, Peer] = {}
        self._modern: Peer | None = None
        self._requests = RequestPeers(
            partial(self._start, own=True), self.limits.max_sessions, self.limits.spare_sessions
        )
        self._tasks: anyio.abc.TaskGroup | None = None
        self.events = InMemorySubscriptionBus()  # the subscriptions/listen streams

    def run(self, task_group: anyio.abc.TaskGroup) -> None:
        """Where the upstream sessions of every client connection run."""
        self._tasks = task_group
        task_group.start_soon(self._requests.reap, task_group)

    def peers(self) -> list[Peer]:
        modern = [self._modern] if self._modern else []
        return [*self._peers.values(), *modern, *self._requests.peers()]

    def stop(self) -> None:
        self._requests.stop()
        for peer in self.peers():
            peer.stop()

    async def close(self) -> None:
        """Stop every upstream session and wait for each (and its process) to end."""
        self._requests.stop()
        with anyio.CancelScope(shield=True):
            for peer in self.peers():
                await peer.close()
            await self._prestarted.close()

    def peer(self, ctx: Any) -> Peer:
        """The upstream sessions of the connection `ctx` came on, started on its first use
        and closed with the connection (a 2026 request over HTTP is a connection of its own;
        the stdio or in-process 2026 client has one set, and so have all 2026 requests over
        HTTP with MCP__MODERN_SESSIONS=shared)."""
        request = http_request(ctx)
        if request is not None and self.limits.modern_sessions == "request":
            return self._requests.peer(request)  # a 2026 request over HTTP: its own
        connection = connection_of(ctx)
        if is_modern(connection):
            if self._modern is None:
                self._modern = self._start(None)
            return self._modern
        assert connection is not None
        peer = self._peers.get(connection)
        if peer is None:
            peer = self._peers[connection] = self._start(connection)
            connection.exit_stack.push_async_callback(self._closed, connection)
        return peer

    def _start(self, connection: Connection | None, own: bool = False) -> Peer:
        if self._tasks is None:
            raise MCPError(types.INTERNAL_ERROR, "the proxy is not running its upstreams")
        # A 2026 request over HTTP hears its own sessions' changes only (`Peer.events`).
        publish = None if own else self.events.publish
        peer = Peer(self.specs, self.limits, connection, publish, self._changed, self._prestarted)
        if not own:  # the first session takes the processes the early front listed
            peer.tool_names.update(self._prestarted.listed())
        peer.start(self._tasks, self._requests.slots if own else None)
        return peer

    async def _closed(self, connection: Connection) -> None:
        peer = self._peers.pop(connection, None)
        if peer is not None:
            await peer.close()

    def public(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    def route(self, peer: Peer, public: str) -> tuple[Upstream, str] | None:
        if not peer.upstreams:
            return None
        if not self.prefixed:
            (only,) = peer.upstreams.values()
            return only, public
        server, sep, name = public.partition(SEPARATOR)
        if not sep or server not in peer.upstreams:
            return None
        return peer.upstreams[server], name

    async def each(self, peer: Peer) -> list[tuple[Upstream, Any]]:
        """Every upstream that answers now, with its session (a dead one is skipped)."""
        live = []
        for upstream in peer.upstreams.values():
            try:
                live.append((upstream, await upstream.session()))
            except UpstreamDown as exc:
                log.warning("%s", exc)
        return live

    async def by_resource(self, ctx: Any, uri: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """`call` on the upstream that listed `uri` (else on each until one answers)."""
        peer = self.peer(ctx)
        owner = peer.resource_owner.get(uri)
        candidates = [peer.upstreams[owner]] if owner else list(peer.upstreams.values())
        last: MCPError | None = None
        for upstream in candidates:
            try:
                client = await upstream.session()
                answer = await call(client)
                upstream.succeeded()
                return answer
            except UpstreamDown as exc:
                last = MCPError(types.INTERNAL_ERROR, str(exc))
            except MCPError as exc:
                last = exc
        raise last or MCPError(types.INVALID_PARAMS, f"unknown resource {uri}")

    async def session(self, upstream: Upstream) -> Any:
        try:
            return await upstream.session()
        except UpstreamDown as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    async def pages(
        self, peer: Peer, upstream: Upstream, fetch: Callable[..., Awaitable[Any]], field: str
    ) -> list[Any]:
        """Every item of an upstream's paginated list, following its cursors (MAX_PAGES).

        An upstream without the capability (a tools-only server: no resources, no prompts)
        lists nothing: the proxy advertises them for its own media and for the upstreams
        that have them, and a method it advertised never answers -32601."""
        if not _advertised(getattr(fetch, "__self__", None), field):
            return []
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                page = await self.guard(peer, upstream, fetch(cursor=cursor))
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
                log.info("upstream %s lists no %s: %s", upstream.name, field, exc.message)
                return items
            items += getattr(page, field)
            cursor = page.next_cursor
            if not cursor:
                return items
        log.warning(
            "upstream %s: %s listed from the first %d pages only", upstream.name, field, MAX_PAGES
        )
        return items

    async def guard(self, peer: Peer, upstream: Upstream, call: Any) -> Any:
        try:
            return await call
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self.broken(peer, upstream, exc.message)
            raise

    def broken(self, peer: Peer, upstream: Upstream, why: str) -> None:
        peer.tool_names.pop(upstream.name, None)  # a restarted upstream may list others
        upstream.broken(why)

    def _changed(self, peer: Peer, name: str, method: str) -> None:
        if method == "notifications/tools/list_changed":
            peer.tool_names.pop(name, None)


@contextmanager
def handshake_era_call() -> Iterator[None]:
    """Forwarding a handshake-era request (logging, subscriptions) our client sent: the
    SDK's warning that the method is deprecated at 2026-07-28 is not for our log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


# The server capability behind each list the proxy merges.
_CAPABILITY = {"resources": "resources", "resource_templates": "resources", "prompts": "prompts"}


def _advertised(client: Any, field: str) -> bool:
    """Whether the upstream session `client` declared the capability behind `field` (True
    when unknown: asking is then the way to find out)."""
    capability = _CAPABILITY.get(field)
    if capability is None or client is None:
        return True
    try:
        declared = client.server_capabilities
    except Exception:  # not connected: the call itself will say so
        return True
    return getattr(declared, capability, None) is not None
