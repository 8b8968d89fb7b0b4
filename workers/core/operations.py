"""The operator's ports: what the jobs page and `/metrics` read of the cluster, and what the
page steers. A door holds these (beside its `JobGateway`) and nothing of the cluster's
machinery; the cluster's adapter (`workers.gateways.operations`) implements them on the
store ports, Celery's remote control and reprocess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


class ClusterView(Protocol):
    """The cluster as the page and `/metrics` show it: read only."""

    def live_workers(self) -> list[WorkerInfo]: ...
    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]: ...
    def paused_queues(self) -> set[str]: ...
    def status_counts(self, capability: str) -> dict[str, int]: ...
    def dead_letters(self, limit: int) -> list[dict[str, Any]]: ...
    def dead_letter_counts(self) -> dict[str, int]: ...
    def dead_letter_count(self) -> int: ...
    def recent(self, limit: int) -> list[Envelope]: ...
    def reprocess_state(self, kind: MediaKind) -> dict[str, Any] | None: ...
    def watch_all(self, callback: Callable[[Envelope], None]) -> Callable[[], None]: ...


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

    def reprocessing(self, kind: MediaKind) -> bool: ...


class Operations(ClusterView, ClusterSteering, Protocol):
    """Both operator ports of one cluster (the jobs page needs both)."""
