"""One MCP task as this process keeps it, and what a request says of tasks: whether it
asks for them (the `io.modelcontextprotocol/tasks` extension), whose they are, and a task's
state as both revisions tell it (`workers.doors.mcp.tasks` runs them, `tasks_wire` speaks
the 2025-11-25 shapes).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from workers.core.gateway import JobHandle
from workers.doors.mcp.peers import connection_of

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 1000
TERMINAL = frozenset({"completed", "failed", "cancelled"})
CURRENT: ContextVar[Task | None] = ContextVar("current_task", default=None)  # the task's call's


class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId", min_length=1)


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


@dataclass
class Task:
    id: str
    owner: Any  # see owner_of
    tool: str
    created: float
    updated: float
    status: str = "working"
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    job: JobHandle | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    awaited: bool = False  # its call waits for it to end within the grace
    answer: types.CallToolResult | None = None  # then its result
    failure: MCPError | None = None  # or its error
    size: int = 0  # bytes of `result` as JSON
    ttl: float = 0.0  # seconds it is kept from its creation
    done: anyio.Event = field(default_factory=anyio.Event)  # set when it ends
    link: Any = None  # the upstream's own task it passes through (upstream_tasks.Link)
    told: Callable[[Task], Awaitable[None]] | None = None  # hears when it ends

    def end(self, status: str, message: str | None = None) -> None:
        self.status, self.message, self.updated = status, message, time.time()
        self.done.set()

    def note(self, message: str, status: str | None = None) -> None:
        """A new status message (or status, not a final one): `lastUpdatedAt` moves when
        either changes."""
        if message != self.message or (status is not None and status != self.status):
            self.message, self.updated = message, time.time()
            self.status = status or self.status


def opted_in(ctx: Any) -> bool:
    """Did this request name the tasks extension in its capabilities (2026-07-28 only: the
    `task` result shape cannot be sent on an earlier protocol)?"""
    if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = getattr(ctx, "meta", None) or {}
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    if isinstance(capabilities, Mapping):
        extensions = capabilities.get("extensions")
    else:
        extensions = getattr(capabilities, "extensions", None)
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def task_state(task: Task, ttl_key: str, poll_key: str) -> dict[str, Any]:
    """A task's state as both revisions tell it (each names the TTL and poll keys)."""
    shape: dict[str, Any] = {
        "taskId": task.id,
        "status": task.status,
        "createdAt": iso(task.created),
        "lastUpdatedAt": iso(task.updated),
        ttl_key: int(task.ttl * 1000),
        poll_key: POLL_MS,
    }
    if task.message:
        shape["statusMessage"] = task.message
    return shape


def handshake_era(ctx: Any) -> bool:
    """A request on a connection that began with `initialize` (before 2026-07-28)?"""
    version = getattr(ctx, "protocol_version", None)
    return version is not None and version not in MODERN_PROTOCOL_VERSIONS


def owner_of(ctx: Any) -> Any:
    """Who may see a task: the client session that made it. That is the transport's session
    id where it has one (HTTP before 2026-07-28), else the connection's channel (one stdio
    connection); a request on no channel at all (stateless HTTP) is only the bearer of the
    door's token, and the unguessable task id is then the key (None)."""
    connection = connection_of(ctx)
    if connection is None:
        return None
    if connection.session_id:
        return connection.session_id
    return connection.outbound if connection.has_standalone_channel else None


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
