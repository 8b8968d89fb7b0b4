"""Admission to the queues: the port a submitting gateway and a starting job hold, its Redis
adapter and its in-memory twin.

A queue's admitted jobs (by expiry and by admission time), its running jobs and the mean
service time of its done jobs live beside each other, so that one script decides a
submission (`admit`), one tells a waiting caller when its job should finish, and one moves
the mean when a result is put (`finished`, queued by the results port on the pipeline that
stores the result). The rule they compute is `workers.core.wait_estimate`'s (the
arithmetic); the twin computes it in Python, on the same clock as its other twins.

Lanes (`workers.core.capabilities.Lane`): a job waits in its lane's queue, so its admitted
jobs (`keys.admitted`, `keys.queued`) are keyed by the lane's queue; batch depth never counts
against a live submission's high water or expected wait, and reprocess waits on the batch
lane's own. The running set and the mean service time stay the capability's (keyed by
`spec.queue`): the slots are shared, and workers take live work first
(`workers.broker.lanes`), so a live job waits behind the running jobs of both lanes but behind
no waiting batch job; counting running batch jobs as running is what the estimate's
`min(running, slots)` already means (every slot busy: the job starts when the first ends).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import redis

from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.capabilities import CAPABILITIES, for_queue
from workers.core.wait_estimate import (
    RUNNING_TTL,
    SERVICE_WEIGHT,
    expected_finish,
    expected_wait,
    next_mean,
)
from workers.state.admission_lua import ADMIT, FINISH_ESTIMATE, FINISHED
from workers.state.redis_values import RELEASE
from workers.state.roster import broker_now
from workers.state.status_index import MemoryStatusIndex


class Decision(StrEnum):
    SETTLED = "settled"  # a done result answers: no job
    JOINED = "joined"  # the job in flight for the key answers
    QUEUED = "queued"  # the caller's job is registered: the caller sends it now
    REFUSED = "refused"  # the queue is at its high water
    BUSY = "busy"  # the new job would finish past the caller's wait


@dataclass(frozen=True, slots=True)
class WaitBudget:
    """How long the caller will wait for its job, and the slots serving its queue."""

    seconds: float
    slots: int


@dataclass(frozen=True, slots=True)
class Submission:
    """What a submission asks of admission: the job `job_id` for `key` on `queue`, its
    in-flight entry kept `ttl` seconds; refused at `high_water` waiting jobs (0: never) or
    past the caller's `budget` (None: never); `force` runs it even over a done result."""

    key: ResultKey
    job_id: str
    ttl: int
    queue: str
    high_water: int = 0
    force: bool = False
    budget: WaitBudget | None = None


@dataclass(frozen=True, slots=True)
class Admitted:
    """What `admit` decided, with the stored envelope (settled), the job in flight (joined)
    or the caller's own (queued), the queue's depth (refused) or the seconds the job is
    expected to take to finish (busy)."""

    decision: Decision
    job_id: str | None = None
    envelope: Envelope | None = None
    waiting: int = 0
    expected: float = 0.0


class QueueAdmission(Protocol):
    def admit(self, submission: Submission) -> Admitted:
        """One atomic decision for a submission (see `workers.state.admission_lua.ADMIT`)."""
        ...

    def started(self, queue: str, job_id: str) -> None:
        """A worker took the job: it no longer counts against its lane's high water (either
        lane of `queue`'s capability), and counts as running (ahead of new jobs) until its
        result is put."""
        ...

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        """Seconds until `job_id`, admitted and still waiting in the lane queue `queue`
        (served by `slots`), is expected to finish; None once a worker started it, or if it
        is not admitted there."""
        ...

    def service_time(self, queue: str) -> float:
        """The measured mean seconds of a done job of `queue`'s capability (0.0: none
        measured yet)."""
        ...

    def inflight_job(self, key: ResultKey) -> str | None:
        """The job in flight for `key`, until its result is put."""
        ...

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        """`job_id` is no longer in flight for `key` (never sent); another job's entry stays."""
        ...


class RedisAdmission:
    """Admission by the broker's clock, each decision one script."""

    def __init__(self, client: redis.Redis[bytes], result_ttl: int) -> None:
        self.redis = client
        self.result_ttl = result_ttl
        self._admit = client.register_script(ADMIT)
        self._finished = client.register_script(FINISHED)
        self._finish_estimate = client.register_script(FINISH_ESTIMATE)
        self._release = client.register_script(RELEASE)

    def admit(self, submission: Submission) -> Admitted:
        s, budget = submission, submission.budget
        decision, value = self._admit(
            keys=[
                keys.result(s.key),
                keys.inflight(s.key),
                keys.job(s.job_id),
                keys.admitted(s.queue),
                keys.running(for_queue(s.queue).queue),
                keys.service(for_queue(s.queue).queue),
                keys.queued(s.queue),
            ],
            args=[
                s.job_id,
                s.ttl,
                s.high_water,
                broker_now(self.redis),
                str(s.key),
                max(s.ttl, self.result_ttl),
                int(s.force),
                budget.seconds if budget is not None else 0,
                budget.slots if budget is not None else 0,
            ],
        )
        decided = Decision(decision.decode())
        text = value.decode() if isinstance(value, bytes) else str(value)
        if decided is Decision.SETTLED:
            return Admitted(decided, envelope=Envelope.from_json(json.loads(text)))
        if decided is Decision.REFUSED:
            return Admitted(decided, waiting=int(text))
        if decided is Decision.BUSY:
            return Admitted(decided, expected=float(text))
        return Admitted(decided, job_id=text)

    def started(self, queue: str, job_id: str) -> None:
        spec = for_queue(queue)
        now = broker_now(self.redis)
        pipe = self.redis.pipeline()
        for lane in spec.lane_queues:
            pipe.zrem(keys.admitted(lane), job_id)
            pipe.zrem(keys.queued(lane), job_id)
        pipe.zadd(keys.running(spec.queue), {job_id: now + RUNNING_TTL})
        pipe.execute()

    def service_time(self, queue: str) -> float:
        raw = self.redis.hget(keys.service(for_queue(queue).queue), "mean")
        return float(raw) if raw is not None else 0.0

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        found = self._finish_estimate(
            keys=[
                keys.admitted(queue),
                keys.queued(queue),
                keys.running(for_queue(queue).queue),
                keys.service(for_queue(queue).queue),
            ],
            args=[job_id, broker_now(self.redis), slots],
        )
        return float(found) if found is not None else None

    def inflight_job(self, key: ResultKey) -> str | None:
        raw = self.redis.get(keys.inflight(key))
        return raw.decode() if raw is not None else None

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        self._release(keys=[keys.inflight(key)], args=[job_id])

    def finished(self, envelope: Envelope, pipe: redis.client.Pipeline[bytes]) -> None:
        """Queue on `pipe` what the result of a job changes of its capability's running set
        and mean (see `workers.state.admission_lua.FINISHED`)."""
        queue = CAPABILITIES[envelope.key.capability].queue
        self._finished(
            keys=[keys.running(queue), keys.service(queue)],
            args=[
                envelope.job_id or "",
                envelope.elapsed_ms / 1000,
                int(envelope.status is Status.DONE),
                SERVICE_WEIGHT,
                RUNNING_TTL,
                self.result_ttl,
            ],
            client=pipe,
        )


class MemoryAdmission:
    """The twin, for one process: the same decisions under a lock, by `clock`; a stored
    result is read from the status index's entries (in Redis, the script reads the entry)."""

    def __init__(
        self, status: MemoryStatusIndex, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._status = status
        self._clock = clock
        self._lock = threading.Lock()
        self._inflight: dict[ResultKey, str] = {}
        self._jobs: dict[str, ResultKey] = {}  # `keys.job`: each admitted job's key
        # lane queue -> admitted jobs no worker started -> expiry, in admission order (a
        # dict keeps insertion order: `keys.queued`)
        self._admitted: dict[str, dict[str, float]] = {}
        # the capability's queue -> its running jobs; -> (mean seconds, jobs)
        self._running: dict[str, dict[str, float]] = {}
        self._service: dict[str, tuple[float, int]] = {}

    def admit(self, submission: Submission) -> Admitted:
        s, now = submission, self._clock()
        stored = self._status.entry(s.key)
        with self._lock:
            if not s.force and stored is not None and stored.status is Status.DONE:
                return Admitted(Decision.SETTLED, envelope=stored)
            current = self._inflight.get(s.key)
            if current is not None:
                return Admitted(Decision.JOINED, job_id=current)
            waiting = self._live(self._admitted, s.queue, now)
            if s.high_water > 0 and len(waiting) >= s.high_water:
                return Admitted(Decision.REFUSED, waiting=len(waiting))
            if s.budget is not None:
                shared = for_queue(s.queue).queue
                running = len(self._live(self._running, shared, now))
                mean = self._service.get(shared, (0.0, 0))[0]
                expected = expected_wait(len(waiting), running, s.budget.slots, mean)
                if expected is not None and expected > s.budget.seconds:
                    return Admitted(Decision.BUSY, expected=expected)
            self._inflight[s.key] = s.job_id
            self._jobs[s.job_id] = s.key
            waiting[s.job_id] = now + s.ttl
            return Admitted(Decision.QUEUED, job_id=s.job_id)

    @staticmethod
    def _live(jobs: dict[str, dict[str, float]], queue: str, now: float) -> dict[str, float]:
        """The queue's jobs whose entry has not expired (the others leave)."""
        found = jobs.setdefault(queue, {})
        for stale in [j for j, expiry in found.items() if expiry <= now]:
            del found[stale]
        return found

    def started(self, queue: str, job_id: str) -> None:
        spec = for_queue(queue)
        with self._lock:
            for lane in spec.lane_queues:
                self._admitted.get(lane, {}).pop(job_id, None)
            self._running.setdefault(spec.queue, {})[job_id] = self._clock() + RUNNING_TTL

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        now, shared = self._clock(), for_queue(queue).queue
        with self._lock:
            waiting = list(self._live(self._admitted, queue, now))
            if job_id not in waiting:
                return None
            running = len(self._live(self._running, shared, now))
            mean = self._service.get(shared, (0.0, 0))[0]
            return expected_finish(waiting.index(job_id), running, slots, mean)

    def service_time(self, queue: str) -> float:
        with self._lock:
            return self._service.get(for_queue(queue).queue, (0.0, 0))[0]

    def inflight_job(self, key: ResultKey) -> str | None:
        with self._lock:
            return self._inflight.get(key)

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        with self._lock:
            if self._inflight.get(key) == job_id:
                del self._inflight[key]

    def finished(self, envelope: Envelope) -> None:
        """What the result of a job changes of its capability's running set and mean (as
        `workers.state.admission_lua.FINISHED`), and its key is no longer in flight."""
        queue = CAPABILITIES[envelope.key.capability].queue
        with self._lock:
            self._inflight.pop(envelope.key, None)
            expiry = self._running.get(queue, {}).pop(envelope.job_id or "", None)
            seconds = envelope.elapsed_ms / 1000
            if expiry is not None:  # its slot's time, from its start
                seconds = max(seconds, self._clock() - (expiry - RUNNING_TTL))
            if envelope.status is Status.DONE and seconds > 0:
                mean, samples = self._service.get(queue, (0.0, 0))
                self._service[queue] = (next_mean(mean, samples, seconds), samples + 1)

    def waiting(self, queue: str) -> int:
        """Jobs admitted to the lane queue `queue` that no worker started (the twin's queue
        length)."""
        now = self._clock()
        with self._lock:
            return len(self._live(self._admitted, queue, now))

    def job_key(self, job_id: str) -> ResultKey | None:
        """The key an admitted job was admitted for (`keys.job`, read by the results port)."""
        with self._lock:
            return self._jobs.get(job_id)
