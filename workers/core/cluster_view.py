"""The read-only cluster view: the port through which the jobs page and `/metrics` read the
cluster, and which holds nothing they could change it with.

A door that shows the cluster holds this port and its job gateway, nothing else of the
cluster: the clock and the live workers (who serves which queue), the queues' lengths and
pauses, the jobs by status, the newest results, the dead letters, a reprocess run's report
and lock. Its implementation reads the shared state (`workers.state.state_view`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pipelines.results import Envelope
from workers.core.announcements import WorkerInfo

# Workers announce themselves in `keys.WORKERS` every few seconds (the heartbeat of
# workers.runtime.heartbeat); one not seen for this long is gone (killed, frozen, cut off).
WORKER_FRESH_SECONDS = 15.0


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
