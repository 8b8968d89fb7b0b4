"""The admission state of each queue in Redis, and the scripts that keep it atomic.

A queue's admitted jobs (by expiry and by admission time), its running jobs and the mean
service time of its done jobs live beside each other, so that one script decides a
submission (`admit`), one tells a waiting caller when its job should finish, and one moves
the mean when a result is put. The rule they compute is `workers.core.wait_estimate`'s; the
in-memory twin (`workers.state.memory`) computes it in Python.
"""

from __future__ import annotations

import json

import redis

from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.capabilities import CAPABILITIES
from workers.core.wait_estimate import (
    RUNNING_TTL,
    SERVICE_WEIGHT,
    Admission,
    Admitted,
    WaitBudget,
)
from workers.state.cluster_view import ClusterView

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


class RedisAdmission(ClusterView):
    """Admission to the cluster's queues, by the broker's clock (the base of `RedisStore`)."""

    def __init__(self, client: redis.Redis[bytes], result_ttl: int) -> None:
        super().__init__(client)
        self.result_ttl = result_ttl
        self._admit = client.register_script(_ADMIT)
        self._finished = client.register_script(_FINISHED)
        self._finish_estimate = client.register_script(_FINISH_ESTIMATE)

    def admit(
        self,
        key: ResultKey,
        job_id: str,
        ttl: int,
        queue: str,
        high_water: int,
        force: bool,
        budget: WaitBudget | None = None,
    ) -> Admitted:
        """One atomic decision for a submission of `key` (see `_ADMIT`)."""
        decision, value = self._admit(
            keys=[
                keys.result(key),
                keys.inflight(key),
                keys.job(job_id),
                keys.admitted(queue),
                keys.running(queue),
                keys.service(queue),
                keys.queued(queue),
            ],
            args=[
                job_id,
                ttl,
                high_water,
                self.now(),
                str(key),
                max(ttl, self.result_ttl),
                int(force),
                budget.seconds if budget is not None else 0,
                budget.slots if budget is not None else 0,
            ],
        )
        decided = Admission(decision.decode())
        text = value.decode() if isinstance(value, bytes) else str(value)
        if decided is Admission.SETTLED:
            return Admitted(decided, envelope=Envelope.from_json(json.loads(text)))
        if decided is Admission.REFUSED:
            return Admitted(decided, waiting=int(text))
        if decided is Admission.BUSY:
            return Admitted(decided, expected=float(text))
        return Admitted(decided, job_id=text)

    def started(self, queue: str, job_id: str) -> None:
        """A worker took the job: it no longer counts against its queue's high water, and
        counts as running (ahead of new jobs) until its result is put."""
        pipe = self.redis.pipeline()
        pipe.zrem(keys.admitted(queue), job_id)
        pipe.zrem(keys.queued(queue), job_id)
        pipe.zadd(keys.running(queue), {job_id: self.now() + RUNNING_TTL})
        pipe.execute()

    def service_time(self, queue: str) -> float:
        """The measured mean seconds of a done job of `queue` (0.0: none measured yet)."""
        raw = self.redis.hget(keys.service(queue), "mean")
        return float(raw) if raw is not None else 0.0

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        """Seconds until `job_id`, admitted and still waiting in `queue` (served by `slots`),
        is expected to finish; None once a worker started it, or if it is not admitted
        (see `_FINISH_ESTIMATE`)."""
        found = self._finish_estimate(
            keys=[
                keys.admitted(queue),
                keys.queued(queue),
                keys.running(queue),
                keys.service(queue),
            ],
            args=[job_id, self.now(), slots],
        )
        return float(found) if found is not None else None

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
