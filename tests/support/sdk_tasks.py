"""The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) for the real SDK's
`Client`: it names the extension in every request's capabilities and, when a `tools/call`
answers with a task, polls `tasks/get` (at the task's pollIntervalMs) until the task ends,
then hands `call_tool` the result inline, as the spec's backwards-compatible client does.
Every `tasks/get` answer is kept in `seen`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskState(types.Result):
    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class TasksExtension(ClientExtension):
    identifier = TASKS

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []
        self.seen: list[TaskState] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, task: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(task)
        with anyio.fail_after(600):  # a hang fails
            while True:
                state = await ctx.session.send_request(
                    GetTask(params=TaskParams(taskId=task.task_id)), TaskState
                )
                self.seen.append(state)
                if state.status == "completed" and state.result is not None:
                    return types.CallToolResult.model_validate(state.result)
                if state.status in ("failed", "cancelled"):
                    error = state.error or {}
                    raise MCPError(
                        int(error.get("code", types.INTERNAL_ERROR)),
                        str(error.get("message", state.status_message or state.status)),
                    )
                await anyio.sleep((state.poll_interval_ms or 1000) / 1000)
