"""The admission twin as the twin roster reads it: `MemoryAdmission`, which also tells how
many jobs of a queue run and when its oldest waiting job was admitted. The Redis roster
reads the same from admission's keys (`workers.state.roster`); in memory only the admission
twin holds them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from workers.state.admission import Admitted, Decision, MemoryAdmission, Submission
from workers.state.roster import shared_queue
from workers.state.status_index import MemoryStatusIndex


class CountedAdmission(MemoryAdmission):
    def __init__(
        self, status: MemoryStatusIndex, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(status, clock)
        # queue -> job admitted and not yet seen started or expired -> when it was admitted,
        # in admission order (`keys.queued`)
        self._since: dict[str, dict[str, float]] = {}

    def admit(self, submission: Submission) -> Admitted:
        admitted = super().admit(submission)
        if admitted.decision is Decision.QUEUED:
            with self._lock:
                self._since.setdefault(submission.queue, {})[submission.job_id] = self._clock()
        return admitted

    def running(self, queue: str) -> int:
        """Jobs of `queue`'s capability a worker started and has not finished (entries not
        expired): both lanes share them, as `workers.state.roster.shared_queue` says."""
        now = self._clock()
        with self._lock:
            return len(self._live(self._running, shared_queue(queue), now))

    def oldest_admitted(self, queue: str) -> float | None:
        """When the oldest job admitted to `queue` that no worker started was admitted."""
        now = self._clock()
        with self._lock:
            waiting = self._live(self._admitted, queue, now)
            since = self._since.setdefault(queue, {})
            for gone in [job for job in since if job not in waiting]:
                del since[gone]
            return next(iter(since.values()), None)
