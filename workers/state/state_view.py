"""The read-only cluster view (`workers.core.cluster_view.ClusterView`) over the shared
state: one implementation, `SharedStateView`, that reads the other ports (results, status
index, dead letters, coordination) and the roster (`workers.state.roster`: what only the
broker knows), so the Redis view and its in-memory twin differ only by what they are built
on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.results import Envelope
from workers.core.announcements import WorkerInfo
from workers.core.cluster_view import WORKER_FRESH_SECONDS, QueueSignals
from workers.state.coordination import Coordination
from workers.state.dead_letters import DeadLetters
from workers.state.results import Results
from workers.state.roster import Roster
from workers.state.status_index import StatusIndex


class SharedStateView:
    """`ClusterView` over the ports of one shared state and its roster."""

    def __init__(
        self,
        roster: Roster,
        results: Results,
        status: StatusIndex,
        dead_letters: DeadLetters,
        coordination: Coordination,
    ) -> None:
        self.roster = roster  # (the twin's announces what runs in its process)
        self._results = results
        self._status = status
        self._dead_letters = dead_letters
        self._coordination = coordination

    def now(self) -> float:
        return self.roster.now()

    def live_workers(self, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        now = self.roster.now()
        found = [
            WorkerInfo.from_announcement(name, data, now)
            for name, data in self.roster.announcements().items()
        ]
        return sorted((w for w in found if w.age_s <= max_age), key=lambda w: w.name)

    def serving(self, queue: str, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        return [w for w in self.live_workers(max_age) if queue in w.queues]

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        return self.roster.queue_lengths(queues)

    def queue_signals(self, queues: Sequence[str]) -> dict[str, QueueSignals]:
        return self.roster.queue_signals(queues)

    def paused_queues(self) -> set[str]:
        return self._coordination.paused_queues()

    def status_counts(self, capability: str) -> dict[str, int]:
        return self._status.counts(capability)

    def recent_results(self, limit: int = 20) -> list[Envelope]:
        wanted = self._results.recent_keys(limit)
        found = self._results.get_many(wanted)
        return [found[key] for key in wanted if key in found]

    def dead_letter_count(self) -> int:
        return self._dead_letters.count()

    def dead_letter_counts(self) -> dict[str, int]:
        return self._dead_letters.counts()

    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._dead_letters.newest(limit)

    def report(self, name: str) -> dict[str, Any] | None:
        return self._coordination.report(name)

    def locked(self, name: str) -> bool:
        return self._coordination.locked(name)
