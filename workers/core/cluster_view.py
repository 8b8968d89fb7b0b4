"""The read-only cluster view: the port through which the jobs page and `/metrics` read the
cluster, and which holds nothing they could change it with.

A door that shows the cluster holds this port and its job gateway, nothing else of the
cluster: the clock and the live workers (who serves which queue), the queues' lengths,
signals (`QueueSignals`: what an autoscaler reads) and pauses, the jobs by status, the
newest results, the dead letters, a reprocess run's report and lock. Its implementation
reads the shared state (`workers.state.state_view`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pipelines.results import Envelope
from workers.core.announcements import WorkerInfo

# Workers announce themselves in `keys.WORKERS` every few seconds (the heartbeat of
# workers.runtime.heartbeat); one not seen for this long is gone (killed, frozen, cut off).
WORKER_FRESH_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class QueueSignals:
    """What an autoscaler and its user read of one queue (a lane of a capability)."""

    waiting: int  # messages no worker took, in every priority list of the queue
    reserved: int  # messages workers took and have not acknowledged: running or about to
    running: int  # jobs a worker started and has not finished
    oldest_waiting_s: float  # how long the oldest admitted job no worker started has waited
    service_s: float  # the mean seconds a done job held its slot (0.0: none measured yet)


class ClusterView(Protocol):
    def now(self) -> float:
        """The broker's clock: workers on other nodes announce themselves by it too."""
        ...

    def live_workers(self, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """Workers that announced themselves within `max_age` seconds, by name."""
        ...

    def serving(self, queue: str, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """The live workers that consume `queue` (none: its jobs wait until one starts)."""
        ...

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        """Jobs waiting in each queue (sent, not yet taken by a worker)."""
        ...

    def queue_signals(self, queues: Sequence[str]) -> dict[str, QueueSignals]:
        """Each queue's signals, read at once (bounded work however long the backlog)."""
        ...

    def paused_queues(self) -> set[str]: ...
    def status_counts(self, capability: str) -> dict[str, int]: ...
    def recent_results(self, limit: int = 20) -> list[Envelope]:
        """The newest stored results still indexed, newest first, each key once."""
        ...

    def dead_letter_count(self) -> int: ...
    def dead_letter_counts(self) -> dict[str, int]: ...
    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]: ...
    def report(self, name: str) -> dict[str, Any] | None: ...
    def locked(self, name: str) -> bool: ...
