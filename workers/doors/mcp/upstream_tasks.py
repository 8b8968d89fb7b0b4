"""A task's upstream call run as the upstream's own task (2025-11-25 tasks), passed through.

When a client asked for a task (either revision: `workers.doors.mcp.tasks`) and the call goes to
an upstream that declares task-augmented `tools/call` (`capabilities.tasks.requests.tools
.call`) for a tool that allows it (`execution.taskSupport` "optional" or "required"), the
proxy asks the upstream for a task instead of waiting on a plain call: our task is linked
to the upstream's (`Link`), our `tasks/get` reads the upstream's status, our `tasks/cancel`
cancels the upstream's task, and the upstream's `tasks/result` is the call's result, which
still goes through the media rewrite. Other upstreams' calls are wrapped in our own task.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from workers.doors.mcp.task_record import CURRENT, TERMINAL, Task

log = logging.getLogger("mcp_media.tasks")

ASK_S = 30.0  # tasks/get and tasks/cancel on the upstream are answered within this
RUNS_AS_TASK = frozenset({"optional", "required"})
# Each upstream session's tools: their execution.taskSupport, as last listed.
_support: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = weakref.WeakKeyDictionary()


@dataclass
class Link:
    """Our task's upstream task: on that upstream session, of that id."""

    client: Client
    upstream: str
    task_id: str

    async def refresh(self, task: Task) -> None:
        """The upstream task's status and message, asked now (its end is ours once its
        result has been through the rewrite)."""
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=self.task_id))
        try:
            state = await self.client.session.send_request(
                request, types.GetTaskResult, request_read_timeout_seconds=ASK_S
            )
        except (MCPError, ValidationError) as exc:  # it says on the next ask
            log.info("upstream %s: task %s not read: %s", self.upstream, self.task_id, exc)
            return
        said = state.status_message or state.status
        if state.status in TERMINAL:
            task.note(f"{task.tool}: {said} (upstream {self.upstream})")
        else:
            task.note(f"{task.tool}: {said} (upstream {self.upstream})", state.status)

    async def cancel(self, task: Task) -> None:
        ident = types.CancelTaskRequestParams(task_id=self.task_id)
        request = types.CancelTaskRequest(params=ident)
        try:
            state = await self.client.session.send_request(
                request, types.CancelTaskResult, request_read_timeout_seconds=ASK_S
            )
        except (MCPError, ValidationError) as exc:
            task.message = f"cancelled; upstream {self.upstream} said: {exc}"[:300]
            return
        task.message = f"cancelled by the client (upstream {self.upstream}: {state.status})"


async def as_upstream_task(client: Client, name: str) -> Task | None:
    """The task this call runs in, when the upstream can run the call as a task of its own
    (else None: a plain call)."""
    task = CURRENT.get()
    if task is None or task.link is not None or not _declares(client):
        return None
    known = _support.get(client.session)
    if known is None or name not in known:
        known = _support[client.session] = await _listed(client)
    return task if known.get(name) in RUNS_AS_TASK else None


async def call_as_upstream_task(
    client: Client, upstream: str, name: str, arguments: dict[str, Any], task: Task
) -> types.CallToolResult:
    """The call as the upstream's task: created, linked to ours, and its result waited for."""
    params = {"name": name, "arguments": arguments, "task": {"ttl": int(task.ttl * 1000)}}
    session: Any = client.session
    data = {"method": "tools/call", "params": params}
    opts: dict[str, Any] = {"timeout": ASK_S}
    # The SDK's send_request checks a tools/call answer against CallToolResult; a
    # CreateTaskResult is what a task-augmented call is answered with.
    session._stamp(data, opts)
    raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)
    created = types.CreateTaskResult.model_validate(raw, by_name=False).task
    task.link = Link(client, upstream, created.task_id)
    task.note(f"{task.tool}: {created.status_message or created.status} (upstream {upstream})")
    request = types.GetTaskPayloadRequest(
        params=types.GetTaskPayloadRequestParams(task_id=created.task_id)
    )
    result: types.CallToolResult = await session.send_request(
        request, types.CallToolResult, request_read_timeout_seconds=task.ttl
    )
    return result


def _declares(client: Client) -> bool:
    tasks = client.server_capabilities.tasks
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    return tools is not None and tools.call is not None


async def _listed(client: Client) -> dict[str, str | None]:
    support: dict[str, str | None] = {}
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            support[tool.name] = tool.execution.task_support if tool.execution else None
        cursor = page.next_cursor
        if not cursor:
            break
    return support
