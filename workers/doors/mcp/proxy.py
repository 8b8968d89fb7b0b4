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
Which upstream session answers a request is `routing`'s to say; the resources methods are
`proxy_resources`'.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPError

from pipelines.errors import InvalidToolResult
from pipelines.outcomes import Outcome
from pipelines.render import unprocessed_note
from workers import version
from workers.core.door_settings import McpSettings
from workers.doors.mcp.clients import client_named
from workers.doors.mcp.early_answers import INSTRUCTIONS, SERVER_NAME
from workers.doors.mcp.link_reads import LinkReads, Resolved, links_back, resolve_links
from workers.doors.mcp.outcomes import door_failure, failure_line
from workers.doors.mcp.peers import Peer, connection_of
from workers.doors.mcp.proxy_resources import ProxyResources
from workers.doors.mcp.rewriter import MediaRewriter, own_line
from workers.doors.mcp.routing import Router, handshake_era_call
from workers.doors.mcp.tasks import Tasks
from workers.doors.mcp.tasks_wire import HandshakeTasks
from workers.doors.mcp.tools import OwnTools, error_result
from workers.doors.mcp.upstream import Upstream, UpstreamDown, UpstreamSpec
from workers.doors.mcp.upstream_process import Prestarted
from workers.doors.mcp.upstream_tasks import as_upstream_task, call_as_upstream_task

log = logging.getLogger("mcp_media.proxy")
# Blocks the rewrite forwards as they come: a result of only these is passed through.
PLAIN_BLOCKS = frozenset({"text", "resource_link"})


class Proxy:
    def __init__(
        self,
        specs: Sequence[UpstreamSpec],
        rewriter: MediaRewriter,
        tools: OwnTools,
        limits: McpSettings | None = None,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.rewriter = rewriter
        self.tools = tools
        self.limits = limits or McpSettings()
        self.router = Router(specs, self.limits, prestarted)
        self.resources = ProxyResources(self.router, tools)
        self._schemas: dict[str, Any] = {}  # input schemas of the tools last listed
        self.server: Server[Any] = _ProxyServer(
            SERVER_NAME,
            version=version.current(),
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            get_tool_input_schema=self._input_schema,
            on_call_tool=self.call_tool,
            on_list_resources=self.resources.list_resources,
            on_list_resource_templates=self.resources.list_resource_templates,
            on_read_resource=self.resources.read_resource,
            on_subscribe_resource=self.resources.subscribe,
            on_unsubscribe_resource=self.resources.unsubscribe,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_completion=self.complete,
            on_subscriptions_listen=self.resources.listen,
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
        self.router.run(task_group)
        self.tasks.bind(task_group)  # and the calls MCP tasks run

    def peers(self) -> list[Peer]:
        return self.router.peers()

    def stop(self) -> None:
        self.router.stop()

    async def close(self) -> None:
        """Stop every upstream session and wait for each (and its process) to end."""
        await self.router.close()

    def _input_schema(self, name: str) -> Any:
        """What a 2026 `tools/call`'s Mcp-Param headers are checked against: the tool's input
        schema as last listed (unknown: not checked). Else the SDK would list the tools
        first, in upstream sessions of their own, at every call over HTTP."""
        known = self._schemas.get(name)
        if known is None and self.tools.has(name):
            known = next((t.input_schema for t in self.tools.definitions() if t.name == name), None)
        return known

    # tools

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        peer = self.router.peer(ctx)
        tools: list[types.Tool] = []
        for upstream, client in await self.router.each(peer):
            listed = await self.router.pages(peer, upstream, client.list_tools, "tools")
            peer.tool_names[upstream.name] = frozenset(tool.name for tool in listed)
            tools += [
                tool.model_copy(update={"name": self.router.public(upstream.name, tool.name)})
                for tool in listed
            ]
        taken = {tool.name for tool in tools}
        tools += [tool for tool in self.tools.definitions() if tool.name not in taken]
        self._schemas = {tool.name: tool.input_schema for tool in tools}
        self.rewriter.open_soon()  # the first answers are out: the jobs' turn
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if self.tasks.takes(ctx):  # the client named the tasks extension (workers.doors.mcp.tasks)
            return await self.tasks.start(ctx, params.name, partial(self.call_tool, ctx, params))
        peer = self.router.peer(ctx)
        arguments = dict(params.arguments or {})
        routed = self.router.route(peer, params.name)
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
            self.router.broken(peer, upstream, exc.message)
            return error_result(
                f"upstream {upstream.name!r} stopped while running {name!r} ({exc.message}); "
                "it is started again on the next call"
            )
        upstream.succeeded()
        raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        resolved = await self._read_links(peer, upstream, client, raw["content"])
        if resolved is not None:
            raw["content"] = resolved.content
        if all(block.get("type") in PLAIN_BLOCKS for block in raw["content"]):
            # nothing to rewrite: skip the ingest round trip
            return result if resolved is None else types.CallToolResult.model_validate(raw)
        try:
            rewritten = await self.rewriter.rewrite_async(
                raw,
                upstream.name,
                client_named(connection_of(ctx)),
                resolved.linked() if resolved is not None else frozenset(),
            )
        except InvalidToolResult as exc:  # forwarded as it came: never lose a result
            log.warning("result of %s not rewritten: %s", params.name, exc)
            return result
        except Exception as exc:  # the broker, the disk, a bug: still never lose a result
            failure = door_failure(exc, self.rewriter.gateway)
            reason = failure_line(failure)
            named = failure.outcome is not Outcome.INTERNAL  # a bug alone needs its traceback
            log.error(
                "result of %s forwarded unprocessed: %s",
                params.name,
                reason,
                exc_info=None if named else exc,
            )
            note = types.TextContent(type="text", text=own_line(unprocessed_note(reason)))
            return result.model_copy(update={"content": [*result.content, note]})
        if resolved is not None:
            rewritten = links_back(rewritten, resolved)
        self.resources.remember_links(rewritten.get("content", []))
        return types.CallToolResult.model_validate(rewritten)

    async def _read_links(
        self, peer: Peer, upstream: Upstream, client: Any, content: list[dict[str, Any]]
    ) -> Resolved | None:
        """The result's `content` (its wire JSON) with its resource links read on `client`
        (the session that sent them), when the door resolves links and there is one; else
        None."""
        if not self.rewriter.options.resolve_links or not any(
            block.get("type") == "resource_link" for block in content
        ):
            return None
        reads = LinkReads(
            read=client.read_resource,
            others=frozenset(
                uri for uri, owner in peer.resource_owner.items() if owner != upstream.name
            ),
            max_bytes=self.rewriter.settings.max_blob_bytes,
            timeout=self.limits.link_read_timeout,
        )
        try:
            return await resolve_links(content, reads)
        except Exception:  # a bug here never costs the result: its links stay as they came
            log.exception("resource links of %s's result not read", upstream.name)
            return None

    async def _upstream_has(self, peer: Peer, routed: tuple[Upstream, str]) -> bool:
        """Whether the upstream has a tool of that name: from its last listing, so an own
        tool is not held up by an upstream busy with a long answer; asked if never listed."""
        upstream, name = routed
        known = peer.tool_names.get(upstream.name)
        if known is None:
            try:
                client = await upstream.session()
                listed = await self.router.pages(peer, upstream, client.list_tools, "tools")
            except (UpstreamDown, MCPError):
                return False
            known = peer.tool_names[upstream.name] = frozenset(tool.name for tool in listed)
        return name in known

    # prompts

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        peer = self.router.peer(ctx)
        prompts: list[types.Prompt] = []
        for upstream, client in await self.router.each(peer):
            listed = await self.router.pages(peer, upstream, client.list_prompts, "prompts")
            prompts += [
                prompt.model_copy(update={"name": self.router.public(upstream.name, prompt.name)})
                for prompt in listed
            ]
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        routed = self.router.route(self.router.peer(ctx), params.name)
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
        peer = self.router.peer(ctx)
        ref = params.ref
        context = params.context.arguments if params.context else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        if isinstance(ref, types.PromptReference):
            routed = self.router.route(peer, ref.name)
            if routed is None:
                raise MCPError(types.INVALID_PARAMS, f"unknown prompt {ref.name!r}")
            upstream, name = routed
            local = ref.model_copy(update={"name": name})
            client = await self.router.session(upstream)
            completed: types.CompleteResult = await client.complete(local, argument, context)
            return completed
        return await self.router.by_resource(
            ctx, ref.uri, lambda client: client.complete(ref, argument, context)
        )

    async def set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """The level is set on every upstream session of this connection."""
        peer = self.router.peer(ctx)
        for upstream, client in await self.router.each(peer):
            with handshake_era_call():
                await self.router.guard(peer, upstream, client.set_logging_level(params.level))
        return types.EmptyResult()


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
