"""The 2025-11-25 task methods over the real task table, in-process: tasks/list pages through
one session's tasks only, tasks/result waits for the end, a cancelled task's result and a
second cancel are refused, lastUpdatedAt moves with the status message."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from workers.core.door_settings import McpSettings
from workers.doors.mcp.task_record import TaskParams
from workers.doors.mcp.tasks import Tasks
from workers.doors.mcp.tasks_wire import PAGE, RELATED, HandshakeTasks

pytestmark = pytest.mark.unit


@dataclass
class Ctx:
    """A request on a 2025-11-25 connection with no transport: every task has one owner."""

    protocol_version: str = "2025-11-25"


def _wire() -> tuple[Tasks, HandshakeTasks]:
    tools: Any = SimpleNamespace(rewriter=SimpleNamespace(gateway=None))
    tasks = Tasks(tools, McpSettings(max_tasks=200))
    server: Server[Any] = Server("test")
    tasks.install(server)
    wire = HandshakeTasks(tasks, server)
    wire.install()
    return tasks, wire


async def _answer(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def test_tasks_list_pages_and_results_wait_for_the_end() -> None:
    async def scenario() -> None:
        tasks, wire = _wire()
        async with anyio.create_task_group() as group:
            tasks.bind(group)
            made = [tasks.create(Ctx(), "t", partial(_answer, f"n{i}")) for i in range(PAGE + 3)]
            seen: list[str] = []
            cursor = None
            pages = 0
            while True:
                params = types.PaginatedRequestParams(cursor=cursor)
                page = await wire.list(Ctx(), params)
                seen += [task["taskId"] for task in page["tasks"]]
                pages += 1
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            assert pages == 2 and seen == [task.id for task in made]
            with pytest.raises(MCPError, match="Invalid cursor"):
                await wire.list(Ctx(), types.PaginatedRequestParams(cursor="999"))

            first = TaskParams(taskId=made[0].id)
            result = await wire.result(Ctx(), first)
            assert result["content"] == [{"type": "text", "text": "n0"}]
            assert result["_meta"] == {RELATED: {"taskId": made[0].id}}
            with pytest.raises(MCPError, match="terminal"):
                await wire.cancel(Ctx(), first)

            hold = anyio.Event()

            async def held() -> types.CallToolResult:
                await hold.wait()
                return await _answer("late")

            waiting = tasks.create(Ctx(), "t", held)
            before = waiting.updated
            await anyio.sleep(0.01)
            waiting.note("t: half done")
            assert waiting.updated > before
            ident = TaskParams(taskId=waiting.id)
            assert (await wire.cancel(Ctx(), ident))["status"] == "cancelled"
            with pytest.raises(MCPError, match="Task cancelled"):
                await wire.result(Ctx(), ident)
            modern = Ctx(protocol_version="2026-07-28")
            with pytest.raises(MCPError, match="Method not found"):
                await wire.result(modern, ident)
            group.cancel_scope.cancel()

    anyio.run(scenario)
