"""`mcp-media proxy`: an MCP server in front of other MCP servers that makes their media usable.

Tools, resources, resource templates and prompts of every upstream are forwarded (named
`<server>__<name>` when there is more than one upstream); every tool result goes through
ingest and comes back rewritten as the media policies say (`pipelines.rewrite`), with
`structuredContent` and `isError` unchanged. Cached media are served as
`mcp-media://media/<sha256>` resources, and mcp-media's own tools sit beside the upstreams'.
Upstream errors reach the client as errors; an upstream that crashes gives an `isError`
result and is started again on the next call. Upstream lists are followed page by page,
and their changes reach the clients (`subscriptions/listen`, or notifications on earlier
protocol versions). A result that cannot be processed is forwarded as it came, with a note.
"""

from __future__ import annotations

import base64
import logging
import math
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from pipelines.errors import InvalidToolResult
from pipelines.render import unprocessed_note
from pipelines.rewrite import MEDIA_URI_PREFIX
from workers import version
from workers.core.door_settings import McpSettings
from workers.doors.mcp.peers import Peer, RequestPeers, connection_of, http_request, is_modern
from workers.doors.mcp.rewriter import MediaRewriter, failure_reason
from workers.doors.mcp.tasks import Tasks
from workers.doors.mcp.tasks_wire import HandshakeTasks
from workers.doors.mcp.tools import OwnTools, error_result
from workers.doors.mcp.upstream import Upstream, UpstreamDown, UpstreamSpec
from workers.doors.mcp.upstream_tasks import as_upstream_task, call_as_upstream_task

log = logging.getLogger("mcp_media.proxy")
T = TypeVar("T")
SEPARATOR = "__"
# Blocks the rewrite forwards as they come: a result of only these is passed through.
PLAIN_BLOCKS = frozenset({"text", "resource_link"})
REMEMBERED_LINKS = 10_000
MAX_PAGES = 100  # pages of an upstream's list followed, against a cursor that never ends


class Proxy:
    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        rewriter: MediaRewriter,
        tools: OwnTools,
        limits: McpSettings | None = None,
    ) -> None:
        self.rewriter = rewriter
        self.tools = tools
        self.limits = limits or McpSettings()
        self.specs = tuple(specs)
        self.prefixed = len(self.specs) > 1
        self._link_mimes: OrderedDict[str, str] = OrderedDict()  # links handed out: their MIME
        self._schemas: dict[str, Any] = {}  # input schemas of the tools last listed
        # Each client connection's upstream sessions (`peers`): the stdio 2026 client's is
        # `_modern`, and a 2026 request over HTTP has its own (`_requests`).
        self._peers: dict[Connection, Peer] = {}
        self._modern: Peer | None = None
        self._requests = RequestPeers(
            partial(self._start, own=True), self.limits.max_sessions, self.limits.spare_sessions
        )
        self._tasks: anyio.abc.TaskGroup | None = None
        self._events = InMemorySubscriptionBus()  # the subscriptions/listen streams
        self._listen = ListenHandler(self._events)
        self.server: Server[Any] = _ProxyServer(
            "mcp-media",
            version=version.current(),
            instructions=(
                "Tool results pass through mcp-media: images and audio come with a MEDIA: path "
                "and, when ready, a summary or transcript; media_result fetches late ones."
            ),
            on_list_tools=self.list_tools,
            get_tool_input_schema=self._input_schema,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_completion=self.complete,
            on_subscriptions_listen=self.listen,
        )
        # Not a constructor argument: that one warns the capability is deprecated (2026-07-28);
        # handshake-era clients still use it.
        self.server.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, self.set_level
        )
        self.tasks = Tasks(tools, self.limits)  # tools/call as MCP tasks, when asked
        self.tasks.install(self.server)
        HandshakeTasks(self.tasks, self.server).install()  # the 2025-11-25 shapes of them

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    async def run_upstreams(self, task_group: anyio.abc.TaskGroup) -> None:
        """Where the upstream sessions of every client connection run."""
        self._tasks = task_group
        self.tasks.bind(task_group)  # and the calls MCP tasks run
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

    def _input_schema(self, name: str) -> Any:
        """What a 2026 `tools/call`'s Mcp-Param headers are checked against: the tool's input
        schema as last listed (unknown: not checked). Else the SDK would list the tools
        first, in upstream sessions of their own, at every call over HTTP."""
        known = self._schemas.get(name)
        if known is None and self.tools.has(name):
            known = next((t.input_schema for t in self.tools.definitions() if t.name == name), None)
        return known

    def _peer(self, ctx: Any) -> Peer:
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
        publish = None if own else self._events.publish
        peer = Peer(self.specs, self.limits, connection, publish, self._changed)
        peer.start(self._tasks, self._requests.slots if own else None)
        return peer

    async def _closed(self, connection: Connection) -> None:
        peer = self._peers.pop(connection, None)
        if peer is not None:
            await peer.close()

    # naming

    def _public(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    def _route(self, peer: Peer, public: str) -> tuple[Upstream, str] | None:
        if not peer.upstreams:
            return None
        if not self.prefixed:
            (only,) = peer.upstreams.values()
            return only, public
        server, sep, name = public.partition(SEPARATOR)
        if not sep or server not in peer.upstreams:
            return None
        return peer.upstreams[server], name

    async def _each(self, peer: Peer) -> list[tuple[Upstream, Any]]:
        """Every upstream that answers now, with its session (a dead one is skipped)."""
        live = []
        for upstream in peer.upstreams.values():
            try:
                live.append((upstream, await upstream.session()))
            except UpstreamDown as exc:
                log.warning("%s", exc)
        return live

    # tools

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        peer = self._peer(ctx)
        tools: list[types.Tool] = []
        for upstream, client in await self._each(peer):
            listed = await self._pages(peer, upstream, client.list_tools, "tools")
            peer.tool_names[upstream.name] = frozenset(tool.name for tool in listed)
            tools += [
                tool.model_copy(update={"name": self._public(upstream.name, tool.name)})
                for tool in listed
            ]
        taken = {tool.name for tool in tools}
        tools += [tool for tool in self.tools.definitions() if tool.name not in taken]
        self._schemas = {tool.name: tool.input_schema for tool in tools}
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if self.tasks.takes(ctx):  # the client named the tasks extension (workers.doors.mcp.tasks)
            return await self.tasks.start(ctx, params.name, partial(self.call_tool, ctx, params))
        peer = self._peer(ctx)
        arguments = dict(params.arguments or {})
        routed = self._route(peer, params.name)
        if self.tools.has(params.name) and (
            routed is None or not await self._upstream_has(peer, routed)
        ):
            return await self.tools.call(params.name, arguments)  # upstream tools win a clash
        if routed is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        upstream, name = routed
        try:
            client = await upstream.session()
        except UpstreamDown as exc:
            return error_result(str(exc))

        limit = self.limits.call_timeout
        # The call's own clock, not the SDK's: each progress notification starts it again.
        clock = anyio.CancelScope(deadline=anyio.current_time() + limit)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            clock.deadline = anyio.current_time() + limit
            await ctx.session.report_progress(progress, total, message)

        try:
            with clock:  # cancelling it sends notifications/cancelled upstream
                if task := await as_upstream_task(client, name):  # its own task (the TTL's)
                    clock.deadline = math.inf
                    result = await call_as_upstream_task(
                        client, upstream.name, name, arguments, task
                    )
                else:
                    result = await client.call_tool(
                        name, arguments, read_timeout_seconds=math.inf, progress_callback=progress
                    )
            if clock.cancelled_caught:
                raise MCPError(
                    types.REQUEST_TIMEOUT,
                    f"upstream {upstream.name!r} did not answer {name!r} within {limit:g} s "
                    "(MCP_MEDIA_MCP__CALL_TIMEOUT; progress notifications extend it); "
                    "the call was cancelled",
                )
        except MCPError as exc:
            if exc.code != types.CONNECTION_CLOSED:
                upstream.succeeded()  # it answered
                raise  # the upstream's own error, as it sent it
            self._broken(peer, upstream, exc.message)
            return error_result(
                f"upstream {upstream.name!r} stopped while running {name!r} ({exc.message}); "
                "it is started again on the next call"
            )
        upstream.succeeded()
        if all(block.type in PLAIN_BLOCKS for block in result.content):
            return result  # nothing to rewrite: skip the ingest round trip
        raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            rewritten = await self.rewriter.rewrite_async(raw, upstream.name)
        except InvalidToolResult as exc:  # forwarded as it came: never lose a result
            log.warning("result of %s not rewritten: %s", params.name, exc)
            return result
        except Exception as exc:  # the broker, the disk, a bug: still never lose a result
            reason = failure_reason(exc, self.rewriter.gateway)
            log.error("result of %s forwarded unprocessed: %s", params.name, reason, exc_info=exc)
            note = types.TextContent(type="text", text=unprocessed_note(reason))
            return result.model_copy(update={"content": [*result.content, note]})
        self._remember_links(rewritten.get("content", []))
        return types.CallToolResult.model_validate(rewritten)

    def _remember_links(self, blocks: Sequence[Any]) -> None:
        """The MIME type of each mcp-media:// link handed out, for resources/read to repeat."""
        for block in blocks:
            if not isinstance(block, Mapping) or block.get("type") != "resource_link":
                continue
            uri, mime = block.get("uri"), block.get("mimeType")
            if isinstance(uri, str) and uri.startswith(MEDIA_URI_PREFIX) and isinstance(mime, str):
                self._link_mimes[uri] = mime
                self._link_mimes.move_to_end(uri)
                if len(self._link_mimes) > REMEMBERED_LINKS:
                    self._link_mimes.popitem(last=False)

    async def _upstream_has(self, peer: Peer, routed: tuple[Upstream, str]) -> bool:
        """Whether the upstream has a tool of that name: from its last listing, so an own
        tool is not held up by an upstream busy with a long answer; asked if never listed."""
        upstream, name = routed
        known = peer.tool_names.get(upstream.name)
        if known is None:
            try:
                client = await upstream.session()
                listed = await self._pages(peer, upstream, client.list_tools, "tools")
            except (UpstreamDown, MCPError):
                return False
            known = peer.tool_names[upstream.name] = frozenset(tool.name for tool in listed)
        return name in known

    # resources

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        if getattr(params, "cursor", None):  # upstreams' come whole on the first page
            return self.tools.media_resources(params.cursor)
        peer = self._peer(ctx)
        resources: list[types.Resource] = []
        for upstream, client in await self._each(peer):
            listed = await self._pages(peer, upstream, client.list_resources, "resources")
            for resource in listed:
                peer.resource_owner[str(resource.uri)] = upstream.name
            resources += listed
        return self.tools.media_resources(None, resources)

    async def list_resource_templates(
        self, ctx: Any, params: Any
    ) -> types.ListResourceTemplatesResult:
        peer = self._peer(ctx)
        templates: list[types.ResourceTemplate] = []
        for upstream, client in await self._each(peer):
            listed = await self._pages(
                peer, upstream, client.list_resource_templates, "resource_templates"
            )
            for template in listed:
                peer.resource_owner[template.uri_template] = upstream.name
            templates += listed
        return types.ListResourceTemplatesResult(
            resource_templates=[*templates, *self.tools.resource_templates()]
        )

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(MEDIA_URI_PREFIX):
            return self._read_media(uri)
        return await self._by_resource(ctx, uri, lambda client: client.read_resource(uri))

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        with _handshake_era():
            await self._by_resource(ctx, uri, lambda client: client.subscribe_resource(uri))
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        with _handshake_era():
            await self._by_resource(ctx, uri, lambda client: client.unsubscribe_resource(uri))
        return types.EmptyResult()

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026 client's `subscriptions/listen`: the changes its upstream sessions send
        (over HTTP the stream's own sessions, held while it is open), and updates of the
        resources it names, subscribed upstream for as long as the stream lasts."""
        peer = self._peer(ctx)
        await self._each(peer)  # the upstreams run: their changes can come
        uris = [str(uri) for uri in params.notifications.resource_subscriptions or ()]
        try:
            for uri in uris:
                peer.listened[uri] += 1
                if peer.listened[uri] == 1:
                    await self._listened(ctx, uri, subscribe=True)
            handler = self._listen if peer.events is None else ListenHandler(peer.events)
            return await handler(ctx, params)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                for uri in uris:
                    peer.listened[uri] -= 1
                    if peer.listened[uri] <= 0:
                        del peer.listened[uri]
                        await self._listened(ctx, uri, subscribe=False)

    async def _listened(self, ctx: Any, uri: str, subscribe: bool) -> None:
        verb = "subscribe_resource" if subscribe else "unsubscribe_resource"
        try:
            with _handshake_era():
                await self._by_resource(ctx, uri, lambda client: getattr(client, verb)(uri))
        except MCPError as exc:  # an upstream without subscriptions: list changes still come
            log.info("resource %s: %s upstream failed: %s", uri, verb, exc)

    async def _by_resource(self, ctx: Any, uri: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """`call` on the upstream that listed `uri` (else on each until one answers)."""
        peer = self._peer(ctx)
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

    def _read_media(self, uri: str) -> types.ReadResourceResult:
        found = self.tools.cached(uri.removeprefix(MEDIA_URI_PREFIX))
        if found is None:
            raise MCPError(types.INVALID_PARAMS, f"no cached media {uri}")
        path, guessed = found
        mime = self._link_mimes.get(uri, guessed)
        blob = base64.b64encode(path.read_bytes()).decode()
        contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=blob)
        return types.ReadResourceResult(contents=[contents])

    # prompts

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        peer = self._peer(ctx)
        prompts: list[types.Prompt] = []
        for upstream, client in await self._each(peer):
            listed = await self._pages(peer, upstream, client.list_prompts, "prompts")
            prompts += [
                prompt.model_copy(update={"name": self._public(upstream.name, prompt.name)})
                for prompt in listed
            ]
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        routed = self._route(self._peer(ctx), params.name)
        if routed is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        upstream, name = routed
        try:
            client = await upstream.session()
        except UpstreamDown as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
        prompt = await client.get_prompt(name, params.arguments)
        upstream.succeeded()
        return prompt

    # completion, logging

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        peer = self._peer(ctx)
        ref = params.ref
        context = params.context.arguments if params.context else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        if isinstance(ref, types.PromptReference):
            routed = self._route(peer, ref.name)
            if routed is None:
                raise MCPError(types.INVALID_PARAMS, f"unknown prompt {ref.name!r}")
            upstream, name = routed
            local = ref.model_copy(update={"name": name})
            client = await self._session(upstream)
            completed: types.CompleteResult = await client.complete(local, argument, context)
            return completed
        return await self._by_resource(
            ctx, ref.uri, lambda client: client.complete(ref, argument, context)
        )

    async def set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """The level is set on every upstream session of this connection."""
        peer = self._peer(ctx)
        for upstream, client in await self._each(peer):
            with _handshake_era():
                await self._guard(peer, upstream, client.set_logging_level(params.level))
        return types.EmptyResult()

    async def _session(self, upstream: Upstream) -> Any:
        try:
            return await upstream.session()
        except UpstreamDown as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    # upstream events

    async def _pages(
        self, peer: Peer, upstream: Upstream, fetch: Callable[..., Awaitable[Any]], field: str
    ) -> list[Any]:
        """Every item of an upstream's paginated list, following its cursors (MAX_PAGES)."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._guard(peer, upstream, fetch(cursor=cursor))
            items += getattr(page, field)
            cursor = page.next_cursor
            if not cursor:
                return items
        log.warning(
            "upstream %s: %s listed from the first %d pages only", upstream.name, field, MAX_PAGES
        )
        return items

    async def _guard(self, peer: Peer, upstream: Upstream, call: Any) -> Any:
        try:
            return await call
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self._broken(peer, upstream, exc.message)
            raise

    def _broken(self, peer: Peer, upstream: Upstream, why: str) -> None:
        peer.tool_names.pop(upstream.name, None)  # a restarted upstream may list others
        upstream.broken(why)

    def _changed(self, peer: Peer, name: str, method: str) -> None:
        if method == "notifications/tools/list_changed":
            peer.tool_names.pop(name, None)


@contextmanager
def _handshake_era() -> Iterator[None]:
    """Forwarding a handshake-era request (logging, subscriptions) our client sent: the
    SDK's warning that the method is deprecated at 2026-07-28 is not for our log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


class _ProxyServer(Server[Any]):
    """The lowlevel server, whose handshake says (over stdio and over HTTP alike, where the
    SDK's session manager asks for the default options) that list changes are sent."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        changes = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(changes, experimental_capabilities, extensions)
