"""Admission to the queues: the port a submitting gateway and a starting job hold, its Redis
adapter and its in-memory twin.

A queue's admitted jobs (by expiry and by admission time), its running jobs and the mean
service time of its done jobs live beside each other, so that one script decides a
submission (`admit`), one tells a waiting caller when its job should finish, and one moves
the mean when a result is put (`finished`, queued by the results port on the pipeline that
stores the result). The rule they compute is `workers.core.wait_estimate`'s (the
arithmetic); the twin computes it in Python, on the same clock as its other twins.
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
from workers.core.capabilities import CAPABILITIES
from workers.core.wait_estimate import (
    RUNNING_TTL,
    SERVICE_WEIGHT,
    expected_finish,
    expected_wait,
    next_mean,
)
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
        """One atomic decision for a submission (see `_ADMIT`)."""
        ...

    def started(self, queue: str, job_id: str) -> None:
        """A worker took the job: it no longer counts against its queue's high water, and
        counts as running (ahead of new jobs) until its result is put."""
        ...

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        """Seconds until `job_id`, admitted and still waiting in `queue` (served by `slots`),
        is expected to finish; None once a worker started it, or if it is not admitted."""
        ...

    def service_time(self, queue: str) -> float:
        """The measured mean seconds of a done job of `queue` (0.0: none measured yet)."""
        ...

    def inflight_job(self, key: ResultKey) -> str | None:
        """The job in flight for `key`, until its result is put."""
        ...

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        """`job_id` is no longer in flight for `key` (never sent); another job's entry stays."""
        ...


# Lua shared by the admission scripts. `prune`: admitted jobs whose entry expired (a message
# that never reached a worker) leave both the expiry-ordered and the time-ordered set.
# `expected`: seconds until a job with `ahead` jobs before it (every slot busy) finishes.
_ADMISSION_LUA = """
local function prune(admitted, queued, now)
  for _, job in ipairs(redis.call('zrangebyscore', admitted, '-inf', now)) do
    redis.call('zrem', admitted, job)
    redis.call('zrem', queued, job)
  end
end
local function expected(ahead, slots, mean)
  return (ahead - slots + 1) * mean / slots + mean
end
"""

# One atomic admission for a key: answered by a done result, joined to the job in flight,
# refused over the queue's high water, else registered (the caller then sends the message).
# The queue's depth is the set of admitted jobs no worker has started yet, scored by expiry,
# so that a burst of submitters cannot all pass a check that only later becomes false; the
# same jobs are kept by admission time too (`keys.queued`), for `_FINISH_ESTIMATE`.
# With a wait bound, a new job is refused ('busy', with the expected seconds) when it would
# not start at once and is expected to finish past the bound (`workers.core.wait_estimate`).
# KEYS: result, inflight, job, admitted, running, service, queued.  ARGV: job id, ttl, high
# water (0: none), now, result key text, job-key ttl, force (1/0), wait bound (0: none), slots.
_ADMIT = (
    _ADMISSION_LUA
    + """
if ARGV[7] == '0' then
  local stored = redis.call('get', KEYS[1])
  if stored and cjson.decode(stored)['status'] == 'done' then return {'settled', stored} end
end
local current = redis.call('get', KEYS[2])
if current then return {'joined', current} end
prune(KEYS[4], KEYS[7], ARGV[4])
local high = tonumber(ARGV[3])
if high > 0 then
  local waiting = redis.call('zcard', KEYS[4])
  if waiting >= high then return {'refused', tostring(waiting)} end
end
local bound = tonumber(ARGV[8])
local slots = tonumber(ARGV[9])
local mean = tonumber(redis.call('hget', KEYS[6], 'mean') or '0')
if bound > 0 and slots > 0 and mean > 0 then
  redis.call('zremrangebyscore', KEYS[5], '-inf', ARGV[4])
  local ahead = redis.call('zcard', KEYS[4]) + math.min(redis.call('zcard', KEYS[5]), slots)
  if ahead >= slots then
    local seconds = expected(ahead, slots, mean)
    if seconds > bound then return {'busy', tostring(seconds)} end
  end
end
redis.call('set', KEYS[2], ARGV[1], 'EX', ARGV[2])
redis.call('set', KEYS[3], ARGV[5], 'EX', ARGV[6])
redis.call('zadd', KEYS[4], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[1])
redis.call('zadd', KEYS[7], ARGV[4], ARGV[1])
return {'queued', ARGV[1]}
"""
)
# Seconds until an admitted job that still waits in its queue finishes, from its position
# among the jobs admitted before it, the jobs running and the current mean
# (`workers.core.wait_estimate.expected_finish`); nil once a worker started it (or it is unknown).
# KEYS: admitted, queued, running, service.  ARGV: job id, now, slots.
_FINISH_ESTIMATE = (
    _ADMISSION_LUA
    + """
prune(KEYS[1], KEYS[2], ARGV[2])
local position = redis.call('zrank', KEYS[2], ARGV[1])
if not position then return false end
redis.call('zremrangebyscore', KEYS[3], '-inf', ARGV[2])
local slots = tonumber(ARGV[3])
local mean = tonumber(redis.call('hget', KEYS[4], 'mean') or '0')
local ahead = position + math.min(redis.call('zcard', KEYS[3]), slots)
if slots > 0 and mean > 0 and ahead >= slots then return tostring(expected(ahead, slots, mean)) end
return tostring(math.max(mean, 0))
"""
)
# A job's result is put: it leaves the running set and, done, its service time (from its
# start in the running set to now: everything its slot spent on it, not only the stage's
# `elapsed_ms`, which is the floor) moves its queue's mean (`workers.core.wait_estimate`).
# KEYS: running, service.  ARGV: job id, elapsed seconds, done (1/0), newest job's least
# weight, running-set ttl, service ttl.
_FINISHED = """
local score = redis.call('zscore', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[1], ARGV[1])
if ARGV[3] ~= '1' then return 0 end
local seconds = tonumber(ARGV[2])
if score then
  local t = redis.call('time')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  seconds = math.max(seconds, now - (tonumber(score) - tonumber(ARGV[5])))
end
if seconds <= 0 then return 0 end
local n = tonumber(redis.call('hget', KEYS[2], 'n') or '0')
local mean = tonumber(redis.call('hget', KEYS[2], 'mean') or '0')
local weight = math.max(1 / (n + 1), tonumber(ARGV[4]))
mean = mean + weight * (seconds - mean)
redis.call('hset', KEYS[2], 'mean', tostring(mean), 'n', tostring(n + 1))
redis.call('expire', KEYS[2], ARGV[6])
return 1
"""


class RedisAdmission:
    """Admission by the broker's clock, each decision one script."""

    def __init__(self, client: redis.Redis[bytes], result_ttl: int) -> None:
        self.redis = client
        self.result_ttl = result_ttl
        self._admit = client.register_script(_ADMIT)
        self._finished = client.register_script(_FINISHED)
        self._finish_estimate = client.register_script(_FINISH_ESTIMATE)
        self._release = client.register_script(RELEASE)

    def admit(self, submission: Submission) -> Admitted:
        s, budget = submission, submission.budget
        decision, value = self._admit(
            keys=[
                keys.result(s.key),
                keys.inflight(s.key),
                keys.job(s.job_id),
                keys.admitted(s.queue),
                keys.running(s.queue),
                keys.service(s.queue),
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
        pipe = self.redis.pipeline()
        pipe.zrem(keys.admitted(queue), job_id)
        pipe.zrem(keys.queued(queue), job_id)
        pipe.zadd(keys.running(queue), {job_id: broker_now(self.redis) + RUNNING_TTL})
        pipe.execute()

    def service_time(self, queue: str) -> float:
        raw = self.redis.hget(keys.service(queue), "mean")
        return float(raw) if raw is not None else 0.0

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        found = self._finish_estimate(
            keys=[
                keys.admitted(queue),
                keys.queued(queue),
                keys.running(queue),
                keys.service(queue),
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
        """Queue on `pipe` what the result of a job changes of its queue (see `_FINISHED`)."""
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
        # queue -> admitted jobs no worker started -> expiry, in admission order (a dict
        # keeps insertion order: `keys.queued`)
        self._admitted: dict[str, dict[str, float]] = {}
        self._running: dict[str, dict[str, float]] = {}
        self._service: dict[str, tuple[float, int]] = {}  # queue -> (mean seconds, jobs)

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
                running = len(self._live(self._running, s.queue, now))
                mean = self._service.get(s.queue, (0.0, 0))[0]
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
        with self._lock:
            self._admitted.get(queue, {}).pop(job_id, None)
            self._running.setdefault(queue, {})[job_id] = self._clock() + RUNNING_TTL

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        now = self._clock()
        with self._lock:
            waiting = list(self._live(self._admitted, queue, now))
            if job_id not in waiting:
                return None
            running = len(self._live(self._running, queue, now))
            mean = self._service.get(queue, (0.0, 0))[0]
            return expected_finish(waiting.index(job_id), running, slots, mean)

    def service_time(self, queue: str) -> float:
        with self._lock:
            return self._service.get(queue, (0.0, 0))[0]

    def inflight_job(self, key: ResultKey) -> str | None:
        with self._lock:
            return self._inflight.get(key)

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        with self._lock:
            if self._inflight.get(key) == job_id:
                del self._inflight[key]

    def finished(self, envelope: Envelope) -> None:
        """What the result of a job changes of its queue (as `_FINISHED`), and its key is no
        longer in flight."""
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
        """Jobs admitted to `queue` that no worker started (the twin's queue length)."""
        now = self._clock()
        with self._lock:
            return len(self._live(self._admitted, queue, now))

    def job_key(self, job_id: str) -> ResultKey | None:
        """The key an admitted job was admitted for (`keys.job`, read by the results port)."""
        with self._lock:
            return self._jobs.get(job_id)
