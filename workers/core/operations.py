"""What the jobs page steers in the cluster: queues paused, pool sizes, dead letters,
reprocess runs, and the stream of results it follows. A door holds this port (beside its
`JobGateway` and the read-only `workers.core.cluster_view.ClusterView`) and nothing of the
cluster's machinery; the cluster's adapter (`workers.gateways.operations`) implements it on
the shared state, Celery's remote control and reprocess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pipelines.media import MediaKind
from pipelines.results import Envelope
from workers.core.announcements import WorkerInfo

CONTROL_TIMEOUT = 2.0  # seconds the page waits for live workers to answer a command
BUSY = "every process is busy; the pool shrinks by one when a process frees"


class AlreadyRunning(Exception):
    """A reprocess run of that kind is going already (on this node or another)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """What a reprocess run takes: the media kinds, all of them or the ones missing a result
    under the current versions (`missing`, optionally the degraded and failed ones too)."""

    kinds: tuple[MediaKind, ...]
    mode: str = "missing"  # or "all"
    include_degraded: bool = False
    since: datetime | None = None
    limit: int | None = None


class ClusterSteering(Protocol):
    """What the page changes: queues paused, pool sizes, dead letters, reprocess runs."""

    def set_paused(self, queue: str, paused: bool) -> tuple[int, list[str]]:
        """Pause or resume `queue`: (how many of its live workers confirmed, their names)."""
        ...

    def resize(self, worker: WorkerInfo, delta: int) -> list[dict[str, Any]]:
        """Grow or shrink a worker's pool by one; each answer (an `error`, a `pending`)."""
        ...

    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None: ...
    def clear_dead_letters(self) -> int: ...
    def recorded_input(self, job_id: str) -> Path | None: ...
    def reprocess(self, selection: Selection) -> None:
        """Run it to the end in this thread; `AlreadyRunning` if a run of a kind is going."""
        ...

    def watch_all(self, callback: Callable[[Envelope], None]) -> Callable[[], None]:
        """Call `callback` with every result stored from now on; the cancel function."""
        ...
