"""Long jobs as MCP tasks: the `io.modelcontextprotocol/tasks` extension (2026-07-28).

A client that names the extension in a request's capabilities (`_meta`
`io.modelcontextprotocol/clientCapabilities` `extensions`) gets, for a call of an own tool
that runs a job (describe_image, transcribe_audio, speak), a task at once
(`resultType: "task"`), and for any other call (an upstream's tool) a task when it has not
ended within `GRACE_S` (else its answer, as before); `tasks/get` tells its status and the
job's progress, and the result inline once done. `tasks/cancel` cancels an upstream's call
(`notifications/cancelled` upstream) and asks a job to stop (it ends `failed`, reason
`cancelled`; the worker serves on) when the task's call started it: a job it joined (the
same media already in flight for another caller) is only no longer waited for. Clients
that do not name the extension get the tool's answer as before.

Tasks live in this process: at most `max_tasks` (finished ones give way, oldest first),
their results within `task_results_mb`, each kept `task_ttl` seconds from its creation,
named by an unguessable id, and seen only by the session that made it: any other id is
"not found".

Handshake-era clients (2025-11-25) get the same tasks in that revision's shape
(`workers.doors.mcp.tasks_wire`); a call an upstream can run as its own task is passed through to
it (`workers.doors.mcp.upstream_tasks`).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from workers.core.door_settings import McpSettings
from workers.core.gateway import Admission, JobGateway, JobHandle
from workers.doors.mcp.task_record import (
    CURRENT,
    EXTENSION,
    TERMINAL,
    Task,
    TaskParams,
    UpdateTaskParams,
    opted_in,
    owner_of,
    task_state,
)
from workers.doors.mcp.tools import TASK, OwnTools, TaskWait

log = logging.getLogger("mcp_media.tasks")

TASK_TOOLS = frozenset({"describe_image", "transcribe_audio", "speak"})
NOT_FOUND = "Failed to retrieve task: Task not found"
JOB_META = "mcp-media/job"  # the task's job id, in its `_meta`
UNFINISHED = frozenset({"pending", "running"})  # a job result's status it is not done with
READ_MARGIN_S = 60.0  # a task ends this long before its TTL (at most half of it): readable
GRACE_S = 1.0  # a call other than an own job tool answers directly if it ends this soon
RUNNING: ContextVar[bool] = ContextVar("running_task", default=False)  # inside a task's call


def job_wait(ttl: float) -> float:
    """How long a task waits for its job: long enough, and ending early enough that its
    outcome can still be read before the task expires."""
    return max(ttl / 2, ttl - READ_MARGIN_S)


class Tasks:
    """The task table of one server, and the handlers of the extension's methods."""

    def __init__(self, tools: OwnTools, limits: McpSettings) -> None:
        self.tools = tools
        self.max_tasks = limits.max_tasks
        self.ttl = limits.task_ttl
        self.results_budget = int(limits.task_results_mb * 1024 * 1024)
        self._tasks: OrderedDict[str, Task] = OrderedDict()  # oldest first
        self._group: anyio.abc.TaskGroup | None = None

    @property
    def gateway(self) -> JobGateway:
        # Asked for at use, not here: the door opens it once its first answers are out.
        return self.tools.rewriter.gateway

    def install(self, server: Server[Any]) -> None:
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskParams, self.get)
        server.add_request_handler("tasks/update", UpdateTaskParams, self.update)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel)

    def bind(self, group: anyio.abc.TaskGroup) -> None:
        """Where the tasks' jobs are waited for: the server's own task group."""
        self._group = group

    def room(self) -> bool:
        """Can a task start now (the server runs, and the table has room)?"""
        return self._group is not None and self._room()

    def takes(self, ctx: Any) -> bool:
        """Does this `tools/call` become a task? When its client named the extension (and it
        is not the call a task runs)."""
        return self._group is not None and not RUNNING.get() and opted_in(ctx)

    async def start(
        self, ctx: Any, name: str, run: Callable[[], Awaitable[types.CallToolResult]]
    ) -> types.CallToolResult:
        """Run the call `run` makes as a task. An own tool that runs a job answers with the
        task at once; any other call that ends within `GRACE_S` answers as it would have
        (the spec lets the server choose), else with its task.

        The task goes out as a mapping, which the SDK's runner sends as it is (its
        `resultType` marks an extension's shape); typed as the call's result for the SDK."""
        assert self._group is not None
        if not self._room():
            if name in TASK_TOOLS:
                raise self.full()
            running = RUNNING.set(True)  # any other call: answered directly, as before
            try:
                return await run()
            finally:
                RUNNING.reset(running)
        task = self.create(ctx, name, run)
        ended = task.done
        if name not in TASK_TOOLS:
            task.awaited = True
            with anyio.move_on_after(GRACE_S):
                await ended.wait()
            task.awaited = False
            if task.answer is not None:  # quick: the answer itself, no task
                del self._tasks[task.id]
                return task.answer
            if task.failure is not None:
                del self._tasks[task.id]
                raise task.failure
        return cast(types.CallToolResult, {"resultType": "task", **self._shape(task)})

    def create(
        self,
        ctx: Any,
        name: str,
        run: Callable[[], Awaitable[types.CallToolResult]],
        ttl: float | None = None,
    ) -> Task:
        """A new task of this session running `run` in the server's task group (the caller
        made room). `ttl`: what the client asked for, within ours."""
        assert self._group is not None
        now = time.time()
        kept = self.ttl if ttl is None else max(1.0, min(ttl, self.ttl))
        task = Task(secrets.token_urlsafe(24), owner_of(ctx), name, now, now, ttl=kept)
        task.message = f"{name}: started"
        self._tasks[task.id] = task
        self._group.start_soon(self._run, task, run)
        return task

    def full(self) -> MCPError:
        return MCPError(
            types.INTERNAL_ERROR,
            f"too many tasks running ({self.max_tasks}, MCP_MEDIA_MCP__MAX_TASKS): "
            "let some finish or cancel them, then call again",
        )

    # the extension's methods

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self._owned(ctx, params.task_id)
        await self.refresh(task)
        return {"resultType": "complete", **self._shape(task)}

    async def refresh(self, task: Task) -> None:
        """The progress of a running task's job (or the upstream's own task), read now."""
        if task.status in TERMINAL:
            return
        if task.link is not None:
            await task.link.refresh(task)
            return
        if task.job is None:
            return
        try:
            done = await anyio.to_thread.run_sync(self.gateway.progress, task.job.id)
        except Exception as exc:  # the broker: the status says what it said before
            log.warning("progress of job %s not read: %s", task.job.id, exc)
            done = None
        if done is not None:
            task.note(f"{task.tool}: job {task.job.id} running, {done:.1f} s of input done")

    async def update(self, ctx: Any, params: UpdateTaskParams) -> dict[str, Any]:
        self._owned(ctx, params.task_id)  # no task of ours asks for input: nothing to take
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self._owned(ctx, params.task_id)
        if task.status not in TERMINAL:
            await self.stop(task)
        return {"resultType": "complete"}

    async def stop(self, task: Task) -> None:
        """Cancel a running task: its call, its job, or the upstream's own task."""
        link = task.link
        task.end("cancelled", "cancelled by the client")
        job = task.job
        task.scope.cancel()
        if link is not None:
            await link.cancel(task)
        if job is not None and job.admission is Admission.QUEUED:
            try:
                await anyio.to_thread.run_sync(self.gateway.cancel, job.id)
            except Exception as exc:  # cooperative: acknowledged, and the status says it
                log.warning("job %s not asked to stop: %s", job.id, exc)
                task.message = f"cancelled; the job could not be asked to stop ({exc})"[:300]
        await self._tell(task)

    def mine(self, ctx: Any) -> list[Task]:
        """This session's tasks, oldest first."""
        self._expire()
        owner = owner_of(ctx)
        return [task for task in self._tasks.values() if task.owner == owner]

    # the table

    def _owned(self, ctx: Any, task_id: str) -> Task:
        if not opted_in(ctx):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Missing required client capability: name io.modelcontextprotocol/tasks in "
                "the request's clientCapabilities extensions",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        return self.owned(ctx, task_id)

    def owned(self, ctx: Any, task_id: str) -> Task:
        """The task of that id if this session made it; else "not found"."""
        self._expire()
        task = self._tasks.get(task_id)
        if task is None or task.owner != owner_of(ctx):
            raise MCPError(types.INVALID_PARAMS, NOT_FOUND)  # another session's: the same
        return task

    def _expire(self) -> None:
        now = time.time()
        for task in [t for t in self._tasks.values() if now - t.created > t.ttl]:
            task.scope.cancel()  # a job past the TTL is no longer waited for
            del self._tasks[task.id]

    def _room(self) -> bool:
        """Room for one more task? The oldest finished one gives way if need be."""
        self._expire()
        if len(self._tasks) < self.max_tasks:
            return True
        finished = next((t for t in self._tasks.values() if t.status in TERMINAL), None)
        if finished is None:
            return False
        del self._tasks[finished.id]
        return True

    def _shape(self, task: Task) -> dict[str, Any]:
        shape = task_state(task, ttl_key="ttlMs", poll_key="pollIntervalMs")
        if task.job is not None:  # for media_result, or a look at the jobs page
            shape["_meta"] = {JOB_META: task.job.id}
        if task.status == "completed" and task.result is not None:
            shape["result"] = task.result
        if task.status == "failed" and task.error is not None:
            shape["error"] = task.error
        return shape

    async def _run(self, task: Task, run: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        def submitted(handle: JobHandle, idle: str | None) -> None:  # in the submitting thread
            task.job = handle
            state = handle.status.value
            if idle is not None:  # it waits for a worker that may yet start
                state = (
                    f"queued: no worker serves the '{idle}' queue yet (start one with "
                    f"`mcp-media worker --queues {idle}`)"
                )
            task.note(f"{task.tool}: job {handle.id} {state}")
            if task.status == "cancelled" and handle.admission is Admission.QUEUED:
                self.gateway.cancel(handle.id)  # cancelled while it was being submitted

        RUNNING.set(True)
        CURRENT.set(task)
        TASK.set(TaskWait(submitted, job_wait(task.ttl)))
        try:
            await self._call(task, run)
        finally:
            task.done.set()
            if task.status != "cancelled":  # a cancel tells of it itself
                await self._tell(task)

    async def _tell(self, task: Task) -> None:
        if task.told is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await task.told(task)
            except Exception as exc:  # a client gone: it reads the status when it asks
                log.debug("status of task %s not sent: %s", task.id[:8], exc)

    async def _call(self, task: Task, run: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        try:
            with task.scope:
                result = await run()
        except MCPError as exc:  # the call's JSON-RPC error (an upstream's, say)
            task.failure = exc
            task.error = exc.error.model_dump(mode="json", by_alias=True, exclude_none=True)
            task.end("failed", f"{task.tool}: {exc.message}"[:500])
            return
        except Exception as exc:  # a bug: the client still hears of it
            log.error("task %s of %s failed", task.id[:8], task.tool, exc_info=exc)
            task.failure = MCPError(types.INTERNAL_ERROR, f"{task.tool} failed: {exc}"[:500])
            task.error = {"code": types.INTERNAL_ERROR, "message": str(exc)[:500]}
            task.end("failed", f"{task.tool} failed: {exc}"[:500])
            return
        if task.scope.cancelled_caught or task.status == "cancelled":
            return
        if task.awaited:
            task.answer = result
        structured = result.structured_content or {}
        task.result = {
            "resultType": "complete",
            **result.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        status = structured.get("status", "done")
        if status in UNFINISHED and task.job is not None:  # the wait ran out before the job
            waited = job_wait(task.ttl)
            text = (
                f"{task.tool}: job {task.job.id} not finished within the task's {waited:.0f} s "
                f"(it stays {status}; {task.message or ''}); fetch it later with media_result"
            )[:500]
            task.result = None
            task.failure = MCPError(types.REQUEST_TIMEOUT, text)
            task.error = {"code": types.REQUEST_TIMEOUT, "message": text}
            task.end("failed", text)
            return
        task.size = len(json.dumps(task.result))
        task.end("completed", f"{task.tool}: {status}")
        self._within_budget(task)

    def _within_budget(self, newest: Task) -> None:
        """Finished tasks' results within `task_results_mb`: the oldest go first (never the
        one just finished)."""
        held = sum(t.size for t in self._tasks.values())
        for old in list(self._tasks.values()):
            if held <= self.results_budget:
                return
            if old is not newest and old.size:
                held -= old.size
                del self._tasks[old.id]
