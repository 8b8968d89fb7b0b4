"""Steering live workers (the jobs page): Celery's remote control, behind three calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

from workers.core.operations import BUSY, CONTROL_TIMEOUT

__all__ = ["BUSY", "CONTROL_TIMEOUT", "ClusterControl"]

THREADS_COMMAND = "mcp_media_threads"  # registered by workers.runtime.pool_commands
PROCESSES_COMMAND = "mcp_media_processes"  # likewise: a shrink that waits for a free process


class ClusterControl:
    def __init__(self, app: Celery) -> None:
        self._control = app.control

    def consume(self, queue: str, consuming: bool, workers: Sequence[str]) -> int:
        """Tell `workers` to stop (or start again) consuming `queue`; how many confirmed."""
        if not workers:
            return 0
        control = self._control
        send: Callable[..., Any] = control.add_consumer if consuming else control.cancel_consumer
        replies = send(queue, destination=list(workers), reply=True, timeout=CONTROL_TIMEOUT)
        return len(replies or [])

    def resize(self, worker: str, pool: str | None, delta: int) -> list[dict[str, Any]]:
        """Grow or shrink one worker's pool by `delta`; the answers of those that replied
        (empty: nobody answered within `CONTROL_TIMEOUT`). A prefork shrink while every
        process is busy answers `pending` and happens when a process frees."""
        control = self._control
        # Celery's threads pool has no grow/shrink, and its prefork pool_shrink refuses (a
        # raw ValueError) while every process is busy: our own commands for both.
        replies = control.broadcast(
            PROCESSES_COMMAND if pool == "prefork" else THREADS_COMMAND,
            arguments={"n": delta},
            destination=[worker],
            reply=True,
            timeout=CONTROL_TIMEOUT,
        )
        return [answer for reply in replies or [] for answer in reply.values()]
