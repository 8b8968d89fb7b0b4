"""MCP tasks as the 2025-11-25 revision has them, for handshake-era clients (SDK 1.x's
`session.experimental.call_tool_as_task`).

A `tools/call` whose params carry `task` (on a connection that negotiated 2025-11-25) is
answered at once with a `CreateTaskResult`; `tasks/get` tells its state, `tasks/result`
waits for it to end and returns the call's result (or its error), with the related-task
`_meta`; `tasks/list` pages through this session's tasks, `tasks/cancel` cancels one, and
`notifications/tasks/status` tells the client when one ends. The server says so in its
`tasks` capability, and every tool says `execution.taskSupport`: "optional" (any call can
run as a task: an upstream's that cannot is wrapped in ours), or "required" where the
upstream requires it.

The tasks are the ones of `workers.doors.mcp.tasks` (one table, two wire shapes): the same limits,
TTL and session scope. Calls that do not ask for a task are answered as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from workers.doors.mcp.early_answers import TASKS_CAPABILITY as CAPABILITY
from workers.doors.mcp.early_answers import TASKS_VERSION
from workers.doors.mcp.peers import connection_of
from workers.doors.mcp.task_record import TERMINAL, Task, TaskParams, handshake_era, task_state
from workers.doors.mcp.tasks import Tasks

RELATED = "io.modelcontextprotocol/related-task"
PAGE = 50  # tasks per tasks/list page
Handler = Callable[[Any, Any], Awaitable[Any]]


def speaks_tasks(ctx: Any) -> bool:
    """Did this connection negotiate the revision with tasks (2025-11-25)?"""
    return getattr(ctx, "protocol_version", None) == TASKS_VERSION


def task_shape(task: Task) -> dict[str, Any]:
    """The 2025-11-25 `Task`."""
    return task_state(task, ttl_key="ttl", poll_key="pollInterval")


class HandshakeTasks:
    """The 2025-11-25 methods over the task table of `tasks`."""

    def __init__(self, tasks: Tasks, server: Server[Any]) -> None:
        self.tasks = tasks
        self.server = server

    def install(self) -> None:
        """Beside the extension's handlers (`Tasks.install`, before this)."""
        for method, handler in (("tasks/get", self.get), ("tasks/cancel", self.cancel)):
            entry = self.server.get_request_handler(method)
            assert entry is not None, f"{method}: Tasks.install first"
            self.server.add_request_handler(method, TaskParams, self.era(entry.handler, handler))
        self.server.add_request_handler("tasks/result", TaskParams, self.result)
        self.server.add_request_handler(
            "tasks/list", types.PaginatedRequestParams, self.era(_no_list, self.list)
        )
        self.server.middleware.append(self.middleware)

    def era(self, modern: Handler, handshake: Handler) -> Handler:
        """The handler for a method both revisions have: each era's own."""

        async def handler(ctx: Any, params: Any) -> Any:
            return await (handshake if handshake_era(ctx) else modern)(ctx, params)

        return handler

    # the server's handshake, tools/list and task-augmented tools/call

    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        method = ctx.method
        if ctx.request_id is None or method not in ("initialize", "tools/list", "tools/call"):
            return await call_next(ctx)
        if method == "tools/call" and speaks_tasks(ctx) and _asks_task(ctx.params):
            connection = connection_of(ctx)
            if connection is not None and connection.initialize_accepted:
                return await self._call_as_task(ctx)
        result = await call_next(ctx)
        if method == "initialize" and isinstance(result, dict):
            if result.get("protocolVersion") == TASKS_VERSION:
                result.setdefault("capabilities", {})["tasks"] = CAPABILITY
        elif method == "tools/list" and speaks_tasks(ctx) and isinstance(result, dict):
            for tool in result.get("tools", []):
                if isinstance(tool, dict):  # we run any call as a task: only "required" stays
                    execution = tool.setdefault("execution", {})
                    if execution.get("taskSupport") != "required":
                        execution["taskSupport"] = "optional"
        return result

    async def _call_as_task(self, ctx: Any) -> dict[str, Any]:
        try:
            params = types.CallToolRequestParams.model_validate(ctx.params, by_name=False)
        except ValidationError as exc:
            reason = " ".join(str(exc).split())[:300]
            raise MCPError(types.INVALID_PARAMS, f"Invalid tools/call params: {reason}") from None
        entry = self.server.get_request_handler("tools/call")
        if entry is None:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", "tools/call")
        if not self.tasks.room():
            raise self.tasks.full()
        wanted = params.task.ttl if params.task is not None else None
        ttl = wanted / 1000 if isinstance(wanted, int) and wanted > 0 else None

        async def run() -> types.CallToolResult:
            result = await entry.handler(ctx, params)
            assert isinstance(result, types.CallToolResult)  # the tools/call handler's
            return result

        task = self.tasks.create(ctx, params.name, run, ttl=ttl)
        connection = connection_of(ctx)
        if connection is not None:

            async def told(ended: Task) -> None:
                await connection.notify("notifications/tasks/status", task_shape(ended))

            task.told = told
        return {"task": task_shape(task)}

    # tasks/*

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self.tasks.owned(ctx, params.task_id)
        await self.tasks.refresh(task)
        return task_shape(task)

    async def result(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        """The call's result once the task has ended (waited for), or its error."""
        if not handshake_era(ctx):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", "tasks/result")
        task = self.tasks.owned(ctx, params.task_id)
        await task.done.wait()
        related = {RELATED: {"taskId": task.id}}
        if task.status == "completed" and task.result is not None:
            result = {k: v for k, v in task.result.items() if k != "resultType"}
            return {**result, "_meta": {**result.get("_meta", {}), **related}}
        if task.status == "cancelled":
            raise MCPError(types.INVALID_PARAMS, "Task cancelled", related)
        error = task.error or {"code": types.INTERNAL_ERROR, "message": task.message or "failed"}
        raise MCPError(error["code"], error["message"], related)

    async def list(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        mine = self.tasks.mine(ctx)
        start = 0
        if params.cursor:
            if not params.cursor.isdigit() or int(params.cursor) > len(mine):
                raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {params.cursor[:50]!r}")
            start = int(params.cursor)
        page: dict[str, Any] = {"tasks": [task_shape(t) for t in mine[start : start + PAGE]]}
        if start + PAGE < len(mine):
            page["nextCursor"] = str(start + PAGE)
        return page

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self.tasks.owned(ctx, params.task_id)
        if task.status in TERMINAL:
            refused = f"Cannot cancel task: already in terminal status {task.status!r}"
            raise MCPError(types.INVALID_PARAMS, refused)
        await self.tasks.stop(task)
        return task_shape(task)


async def _no_list(ctx: Any, params: Any) -> dict[str, Any]:
    raise MCPError(types.METHOD_NOT_FOUND, "Method not found", "tasks/list")


def _asks_task(params: Any) -> bool:
    return isinstance(params, Mapping) and isinstance(params.get("task"), Mapping)
