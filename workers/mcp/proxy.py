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
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)

from pipelines.errors import InvalidToolResult
from pipelines.render import unprocessed_note
from pipelines.rewrite import MEDIA_URI_PREFIX
from workers.mcp.rewriter import MediaRewriter, failure_reason
from workers.mcp.tasks import Tasks
from workers.mcp.tools import OwnTools, error_result
from workers.mcp.upstream import Upstream, UpstreamDown, UpstreamSpec
from workers.settings import McpSettings

log = logging.getLogger("mcp_media.proxy")
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
        self.upstreams = {
            spec.name: Upstream(spec, self._upstream_message, self.limits) for spec in specs
        }
        self.prefixed = len(self.upstreams) > 1
        self._resource_owner: dict[str, str] = {}
        self._tool_names: dict[str, frozenset[str]] = {}  # each upstream's, as last listed
        self._link_mimes: OrderedDict[str, str] = OrderedDict()  # links handed out: their MIME
        # Downstream sessions, for list-changed notifications: held weakly, so a session the
        # transport ended (DELETE, idle timeout, a client gone) is not kept alive here.
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._events = InMemorySubscriptionBus()  # and the subscriptions/listen streams
        self.server: Server[Any] = Server(
            "mcp-media",
            instructions=(
                "Tool results pass through mcp-media: images and audio come with a MEDIA: path "
                "and, when ready, a summary or transcript; media_result fetches late ones."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_subscriptions_listen=ListenHandler(self._events),
        )
        self.tasks = Tasks(tools, self.limits)  # own tools' jobs as MCP tasks, when asked
        self.tasks.install(self.server)

    def initialization_options(self) -> Any:
        changes = NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return self.server.create_initialization_options(notification_options=changes)

    async def run_upstreams(self, task_group: anyio.abc.TaskGroup) -> None:
        self.tasks.bind(task_group)
        for upstream in self.upstreams.values():
            task_group.start_soon(upstream.run)

    def stop(self) -> None:
        for upstream in self.upstreams.values():
            upstream.stop()

    # naming

    def _public(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    def _route(self, public: str) -> tuple[Upstream, str] | None:
        if not self.upstreams:
            return None
        if not self.prefixed:
            (only,) = self.upstreams.values()
            return only, public
        server, sep, name = public.partition(SEPARATOR)
        if not sep or server not in self.upstreams:
            return None
        return self.upstreams[server], name

    def _remember(self, ctx: Any) -> None:
        session = getattr(ctx, "session", None)
        if session is not None:
            self._sessions.add(session)

    async def _each(self) -> list[tuple[Upstream, Any]]:
        """Every upstream that answers now, with its session (a dead one is skipped)."""
        live = []
        for upstream in self.upstreams.values():
            try:
                live.append((upstream, await upstream.session()))
            except UpstreamDown as exc:
                log.warning("%s", exc)
        return live

    # tools

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._remember(ctx)
        tools: list[types.Tool] = []
        for upstream, client in await self._each():
            listed = await self._pages(upstream, client.list_tools, "tools")
            self._tool_names[upstream.name] = frozenset(tool.name for tool in listed)
            tools += [
                tool.model_copy(update={"name": self._public(upstream.name, tool.name)})
                for tool in listed
            ]
        taken = {tool.name for tool in tools}
        tools += [tool for tool in self.tools.definitions() if tool.name not in taken]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if self.tasks.takes(ctx):  # the client named the tasks extension (workers.mcp.tasks)
            return await self.tasks.start(ctx, params.name, partial(self.call_tool, ctx, params))
        self._remember(ctx)
        arguments = dict(params.arguments or {})
        routed = self._route(params.name)
        if self.tools.has(params.name) and (routed is None or not await self._upstream_has(routed)):
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
            self._broken(upstream, exc.message)
            return error_result(
                f"upstream {upstream.name!r} stopped while running {name!r} ({exc.message}); "
                "it is started again on the next call"
            )
        upstream.succeeded()
        if all(block.type in PLAIN_BLOCKS for block in result.content):
            return result  # nothing to rewrite: skip the ingest round trip
        raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            rewritten = await anyio.to_thread.run_sync(self.rewriter.rewrite, raw, upstream.name)
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

    async def _upstream_has(self, routed: tuple[Upstream, str]) -> bool:
        """Whether the upstream has a tool of that name: from its last listing, so an own
        tool is not held up by an upstream busy with a long answer; asked if never listed."""
        upstream, name = routed
        known = self._tool_names.get(upstream.name)
        if known is None:
            try:
                client = await upstream.session()
                listed = await self._pages(upstream, client.list_tools, "tools")
            except (UpstreamDown, MCPError):
                return False
            known = self._tool_names[upstream.name] = frozenset(tool.name for tool in listed)
        return name in known

    # resources

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        self._remember(ctx)
        if getattr(params, "cursor", None):  # upstreams' come whole on the first page
            return self.tools.media_resources(params.cursor)
        resources: list[types.Resource] = []
        for upstream, client in await self._each():
            listed = await self._pages(upstream, client.list_resources, "resources")
            for resource in listed:
                self._resource_owner[str(resource.uri)] = upstream.name
            resources += listed
        return self.tools.media_resources(None, resources)

    async def list_resource_templates(
        self, ctx: Any, params: Any
    ) -> types.ListResourceTemplatesResult:
        templates: list[types.ResourceTemplate] = []
        for upstream, client in await self._each():
            templates += await self._pages(
                upstream, client.list_resource_templates, "resource_templates"
            )
        return types.ListResourceTemplatesResult(
            resource_templates=[*templates, *self.tools.resource_templates()]
        )

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(MEDIA_URI_PREFIX):
            return self._read_media(uri)
        owner = self._resource_owner.get(uri)
        candidates = [self.upstreams[owner]] if owner else list(self.upstreams.values())
        last: MCPError | None = None
        for upstream in candidates:
            try:
                client = await upstream.session()
                read = await client.read_resource(uri)
                upstream.succeeded()
                return read
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
        prompts: list[types.Prompt] = []
        for upstream, client in await self._each():
            listed = await self._pages(upstream, client.list_prompts, "prompts")
            prompts += [
                prompt.model_copy(update={"name": self._public(upstream.name, prompt.name)})
                for prompt in listed
            ]
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        routed = self._route(params.name)
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

    # upstream events

    async def _pages(
        self, upstream: Upstream, fetch: Callable[..., Awaitable[Any]], field: str
    ) -> list[Any]:
        """Every item of an upstream's paginated list, following its cursors (MAX_PAGES)."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._guard(upstream, fetch(cursor=cursor))
            items += getattr(page, field)
            cursor = page.next_cursor
            if not cursor:
                return items
        log.warning(
            "upstream %s: %s listed from the first %d pages only", upstream.name, field, MAX_PAGES
        )
        return items

    async def _guard(self, upstream: Upstream, call: Any) -> Any:
        try:
            return await call
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self._broken(upstream, exc.message)
            raise

    def _broken(self, upstream: Upstream, why: str) -> None:
        self._tool_names.pop(upstream.name, None)  # a restarted upstream may list others
        upstream.broken(why)

    async def _upstream_message(self, name: str, message: Any) -> None:
        """Forward an upstream's list changes to our clients: as an event on their
        `subscriptions/listen` streams (2026-07-28) and as a notification (earlier versions)."""
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        send, event = _CHANGES.get(method, (None, None))
        if send is None or event is None:
            return
        if event is ToolsListChanged:
            self._tool_names.pop(name, None)
        await self._events.publish(event())
        for session in list(self._sessions):
            try:
                await getattr(session, send)()
            except Exception:  # that client is gone
                self._sessions.discard(session)


_CHANGES: dict[str, tuple[str, Callable[[], ServerEvent]]] = {
    "notifications/tools/list_changed": ("send_tool_list_changed", ToolsListChanged),
    "notifications/resources/list_changed": ("send_resource_list_changed", ResourcesListChanged),
    "notifications/prompts/list_changed": ("send_prompt_list_changed", PromptsListChanged),
}
