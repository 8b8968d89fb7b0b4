"""Where results, claims and in-flight jobs live: the `ResultStore` port and its Redis adapter.

Sidecar files (pipelines.results.Sidecars) stay the truth; everything in Redis can be rebuilt
from them or expires by itself, so a flushed Redis loses no finished work. The in-memory
twin (`workers.localstore.LocalStore`) serves `--inline` runs and unit tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import redis

from pipelines.results import Envelope, ResultFiles, ResultKey, Status
from workers import chunks, keys
from workers.admission import RUNNING_TTL, SERVICE_WEIGHT, WaitBudget
from workers.announcements import WorkerInfo
from workers.capabilities import CAPABILITIES
from workers.chunks import Chunk
from workers.journal import JobJournal
from workers.redis_target import RedisTarget, bounded_client, resilient
from workers.settings import Settings

if TYPE_CHECKING:
    from workers.storage import Storage

# Delete or extend a key only if it still holds our token.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# Counting semaphore on a sorted set scored by expiry time: a dead holder's slot expires.
_SEM_ACQUIRE = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('zadd', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
return 0
"""

# Index a result and move its key's count from the status it stood at to the one it has
# now: the counters say how many keys stand at each status, so a job that failed and then
# succeeded on retry counts as done only. KEYS: result, counts. ARGV: envelope JSON, ttl,
# status.
_INDEX_COUNTED = """
local old = redis.call('get', KEYS[1])
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
if old then
  local ok, was = pcall(function() return cjson.decode(old)['status'] end)
  if ok and type(was) == 'string' then
    if was == ARGV[3] then return 0 end
    if tonumber(redis.call('hget', KEYS[2], was) or '0') > 0 then
      redis.call('hincrby', KEYS[2], was, -1)
    end
  end
end
redis.call('hincrby', KEYS[2], ARGV[3], 1)
return 1
"""

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
# not start at once and is expected to finish past the bound (`workers.admission`).
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
# (`workers.admission.expected_finish`); nil once a worker started it (or it is unknown).
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
# `elapsed_ms`, which is the floor) moves its queue's mean (`workers.admission`).
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


@dataclass(frozen=True, slots=True)
class Admitted:
    """What `admit` decided: `settled` (with the stored envelope), `joined` (with the job in
    flight), `queued` (the caller's job id, now registered), `refused` (queue depth) or
    `busy` (expected to finish `expected` seconds from now, past the caller's wait)."""

    decision: str
    job_id: str | None = None
    envelope: Envelope | None = None
    waiting: int = 0
    expected: float = 0.0


# Workers announce themselves in `keys.WORKERS` every few seconds (the heartbeat of
# workers.runtime.recovery); one not seen for this long is gone (killed, frozen, cut off).
WORKER_FRESH_SECONDS = 15.0
RECENT_KEPT = 200  # result keys kept in keys.RECENT for the jobs page


@dataclass(frozen=True, slots=True)
class Claim:
    key: ResultKey
    token: str


class ResultStore(Protocol):
    """Everything a job, the client and reprocess ask of the cluster's shared state."""

    sidecars: ResultFiles

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None: ...
    def get_many(self, wanted: list[ResultKey]) -> dict[ResultKey, Envelope]: ...
    def put(self, envelope: Envelope, *, sidecar: bool = True) -> None: ...
    def admit(
        self,
        key: ResultKey,
        job_id: str,
        ttl: int,
        queue: str,
        high_water: int,
        force: bool,
        budget: WaitBudget | None = None,
    ) -> Admitted: ...
    def service_time(self, queue: str) -> float: ...
    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None: ...
    def started(self, queue: str, job_id: str) -> None: ...
    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None: ...
    def forget_record(self, job_id: str) -> None: ...
    def forget_job(self, key: ResultKey, job_id: str) -> None: ...
    def inflight_job(self, key: ResultKey) -> str | None: ...
    def key_for_job(self, job_id: str) -> ResultKey | None: ...
    def latest_key(self, capability: str, sha256: str) -> ResultKey | None: ...
    def count_delivery(self, job_id: str, ttl: int) -> int: ...
    def uncount_delivery(self, job_id: str) -> None: ...
    def dead_letter(self, job_id: str, key: ResultKey, reason: str) -> None: ...
    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]: ...
    def dead_letter_counts(self) -> dict[str, int]: ...
    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None: ...
    def clear_dead_letters(self) -> int: ...
    def set_paused(self, queue: str, paused: bool) -> None: ...
    def paused_queues(self) -> set[str]: ...
    def take_lock(self, name: str, token: str, ttl: float) -> bool: ...
    def renew_lock(self, name: str, token: str, ttl: float) -> bool: ...
    def release_lock(self, name: str, token: str) -> None: ...
    def locked(self, name: str) -> bool: ...
    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None: ...
    def report(self, name: str) -> dict[str, Any] | None: ...
    def job_record(self, job_id: str) -> dict[str, Any] | None: ...
    def append_chunk(self, name: str, data: bytes) -> None: ...
    def end_chunks(self, name: str, error: str = "") -> None: ...
    def read_chunks(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]: ...
    def claim(self, key: ResultKey, ttl: float) -> Claim | None: ...
    def renew(self, claim: Claim, ttl: float) -> bool: ...
    def reclaim(self, claim: Claim, ttl: float) -> bool: ...
    def release(self, claim: Claim) -> None: ...
    def claimed(self, key: ResultKey) -> bool: ...
    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None: ...
    def release_slot(self, name: str, token: str) -> None: ...
    def status_counts(self, capability: str) -> dict[str, int]: ...
    def close(self) -> None: ...


class RedisStore:
    """Results for the whole cluster: Redis for speed and coordination, sidecars for truth."""

    def __init__(
        self,
        client: redis.Redis[bytes],
        sidecars: ResultFiles,
        result_ttl: int,
        journal: JobJournal,
    ) -> None:
        self.redis = client
        self.sidecars = sidecars
        # Submitted, unfinished jobs where every node's recovery sweep reads them.
        self.journal = journal
        self.result_ttl = result_ttl
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._sem_acquire = client.register_script(_SEM_ACQUIRE)
        self._admit = client.register_script(_ADMIT)
        self._index_counted = client.register_script(_INDEX_COUNTED)
        self._finished = client.register_script(_FINISHED)
        self._finish_estimate = client.register_script(_FINISH_ESTIMATE)

    # finished results

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None:
        """The key's result from the index, else from its sidecar (which re-indexes it);
        `sidecar=False` when the caller knows no sidecar can exist (its input is new)."""
        raw, inflight = self.redis.mget([keys.result(key), keys.inflight(key)])
        if raw is not None:
            return Envelope.from_json(json.loads(raw))
        if not sidecar or inflight is not None:
            # Admitted since Redis last lost its data (a flush drops this key too): a
            # result would be indexed here. No sidecar read (a round trip to the bucket).
            return None
        envelope = self.sidecars.read(key)
        if envelope is not None:
            self._index(envelope)  # Redis was flushed or the entry expired: rebuild it
        return envelope

    def get_many(self, wanted: list[ResultKey]) -> dict[ResultKey, Envelope]:
        if not wanted:
            return {}
        found: dict[ResultKey, Envelope] = {}
        raws = self.redis.mget([keys.result(k) for k in wanted])
        for key, raw in zip(wanted, raws, strict=True):
            if raw is not None:
                found[key] = Envelope.from_json(json.loads(raw))
        return found

    def put(self, envelope: Envelope, *, sidecar: bool = True) -> None:
        """Write the sidecar first (the truth), then index it and announce it. Without
        `sidecar`: only indexed and announced (a failure that no disk had room for)."""
        if sidecar:
            self.sidecars.write(envelope)
        capability = envelope.key.capability.value
        self._index_counted(
            keys=[keys.result(envelope.key), keys.counts(capability)],
            args=[json.dumps(envelope.to_json()), self.result_ttl, envelope.status.value],
        )
        self._index(envelope, result=False)
        pipe = self.redis.pipeline()
        pipe.delete(keys.inflight(envelope.key))
        pipe.lpush(keys.RECENT, str(envelope.key))
        pipe.ltrim(keys.RECENT, 0, RECENT_KEPT - 1)
        pipe.publish(keys.EVENTS, json.dumps(envelope.to_json()))
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
        pipe.execute()

    def _index(self, envelope: Envelope, result: bool = True) -> None:
        pipe = self.redis.pipeline()
        if result:
            pipe.set(keys.result(envelope.key), json.dumps(envelope.to_json()), ex=self.result_ttl)
        pipe.set(
            keys.latest(envelope.key.capability.value, envelope.key.sha256),
            str(envelope.key),
            ex=self.result_ttl,
        )
        if envelope.job_id:
            pipe.set(keys.job(envelope.job_id), str(envelope.key), ex=self.result_ttl)
        pipe.execute()

    def close(self) -> None:
        self.redis.close()

    # jobs in flight

    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None:
        """What re-sending the job needs if its worker dies: task, arguments, queue, limits."""
        self.redis.set(keys.job_record(job_id), json.dumps(record), ex=ttl)

    def forget_record(self, job_id: str) -> None:
        with contextlib.suppress(redis.RedisError):
            self.redis.delete(keys.job_record(job_id))

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
        decision = decision.decode()
        text = value.decode() if isinstance(value, bytes) else str(value)
        if decision == "settled":
            return Admitted(decision, envelope=Envelope.from_json(json.loads(text)))
        if decision == "refused":
            return Admitted(decision, waiting=int(text))
        if decision == "busy":
            return Admitted(decision, expected=float(text))
        return Admitted(decision, job_id=text)

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

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        self._release(keys=[keys.inflight(key)], args=[job_id])

    def inflight_job(self, key: ResultKey) -> str | None:
        raw = self.redis.get(keys.inflight(key))
        return raw.decode() if raw is not None else None

    def key_for_job(self, job_id: str) -> ResultKey | None:
        raw = self.redis.get(keys.job(job_id))
        return ResultKey.parse(raw.decode()) if raw is not None else None

    def latest_key(self, capability: str, sha256: str) -> ResultKey | None:
        raw = self.redis.get(keys.latest(capability, sha256))
        return ResultKey.parse(raw.decode()) if raw is not None else None

    def count_delivery(self, job_id: str, ttl: int) -> int:
        pipe = self.redis.pipeline()
        pipe.incr(keys.deliveries(job_id))
        pipe.expire(keys.deliveries(job_id), ttl)
        count, _ = pipe.execute()
        return int(count)

    def uncount_delivery(self, job_id: str) -> None:
        """A delivery that ran nothing (its key was claimed): not counted against the cap."""
        self.redis.decr(keys.deliveries(job_id))

    def dead_letter(self, job_id: str, key: ResultKey, reason: str) -> None:
        entry = {"job_id": job_id, "key": str(key), "reason": reason, "at": time.time()}
        self.redis.lpush(keys.DEAD_LETTERS, json.dumps(entry))

    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.redis.lrange(keys.DEAD_LETTERS, 0, limit - 1)]

    # claims: one worker at a time works on one key

    def claim(self, key: ResultKey, ttl: float) -> Claim | None:
        """Take the key, or None while a live owner holds it.

        Tokens are random per claim, never derived from a host name or pid: two workers with
        the same host name in different PID namespaces must never take each other's live
        claim. A claim whose holder died expires with its TTL (renewed while alive).
        """
        token = f"{os.getpid()}:{secrets.token_hex(16)}"  # the pid is for people reading it
        if self.redis.set(keys.claim(key), token, nx=True, px=int(ttl * 1000)):
            return Claim(key, token)
        return None

    def renew(self, claim: Claim, ttl: float) -> bool:
        return bool(self._renew(keys=[keys.claim(claim.key)], args=[claim.token, int(ttl * 1000)]))

    def reclaim(self, claim: Claim, ttl: float) -> bool:
        """Take back a claim that expired while its job still ran (nobody could renew it
        during a broker outage), unless another delivery took the key meanwhile."""
        return bool(self.redis.set(keys.claim(claim.key), claim.token, nx=True, px=int(ttl * 1000)))

    def release(self, claim: Claim) -> None:
        self._release(keys=[keys.claim(claim.key)], args=[claim.token])

    def claimed(self, key: ResultKey) -> bool:
        return bool(self.redis.exists(keys.claim(key)))

    # a cluster-wide semaphore whose slots expire with their holder

    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None:
        token = secrets.token_hex(12)
        now = time.time()
        ok = self._sem_acquire(keys=[keys.semaphore(name)], args=[now, now + ttl, limit, token])
        return token if ok else None

    def release_slot(self, name: str, token: str) -> None:
        self.redis.zrem(keys.semaphore(name), token)

    def status_counts(self, capability: str) -> dict[str, int]:
        raw = self.redis.hgetall(keys.counts(capability))
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}

    # the cluster: who serves which queue, and how much is waiting

    def now(self) -> float:
        """The broker's clock: workers on other nodes announce themselves by it too."""
        seconds, micros = self.redis.time()
        return float(seconds) + float(micros) / 1e6

    def live_workers(self, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """Workers that announced themselves within `max_age` seconds, by name."""
        now = self.now()
        workers = []
        for raw_name, raw in self.redis.hgetall(keys.WORKERS).items():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            info = WorkerInfo.from_announcement(raw_name.decode(), data, now)
            if info.age_s <= max_age:
                workers.append(info)
        return sorted(workers, key=lambda w: w.name)

    def serving(self, queue: str, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """The live workers that consume `queue` (none: its jobs wait until one starts)."""
        return [w for w in self.live_workers(max_age) if queue in w.queues]

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        """Jobs waiting in each queue (sent, not yet taken by a worker)."""
        pipe = self.redis.pipeline()
        for queue in queues:
            pipe.llen(queue)
        return {q: int(n) for q, n in zip(queues, pipe.execute(), strict=True)}

    def dead_letter_count(self) -> int:
        return int(self.redis.llen(keys.DEAD_LETTERS))

    def recent_keys(self, limit: int = 20) -> list[ResultKey]:
        """The keys of the newest stored results, newest first, each once."""
        found: dict[str, None] = {}
        for raw in self.redis.lrange(keys.RECENT, 0, RECENT_KEPT - 1):
            found.setdefault(raw.decode(), None)
            if len(found) >= limit:
                break
        parsed = []
        for text in found:
            with contextlib.suppress(ValueError):
                parsed.append(ResultKey.parse(text))
        return parsed

    def paused_queues(self) -> set[str]:
        """Queues paused from the jobs page: workers stop consuming them until resumed."""
        return {raw.decode() for raw in self.redis.smembers(keys.PAUSED)}

    def set_paused(self, queue: str, paused: bool) -> None:
        if paused:
            self.redis.sadd(keys.PAUSED, queue)
        else:
            self.redis.srem(keys.PAUSED, queue)

    # dead letters, as the jobs page reads and clears them

    def _letters(self) -> list[tuple[bytes, dict[str, Any]]]:
        raws = self.redis.lrange(keys.DEAD_LETTERS, 0, keys.DEAD_LETTERS_READ - 1)
        return [(raw, _json_object(raw)) for raw in raws]

    def dead_letter_counts(self) -> dict[str, int]:
        """Dead letters by capability (the newest `keys.DEAD_LETTERS_READ`)."""
        counts: dict[str, int] = {}
        for _, entry in self._letters():
            capability = str(entry.get("key", "")).split(":", 1)[0]
            counts[capability] = counts.get(capability, 0) + 1
        return counts

    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None:
        """Remove the dead letter of `job_id`; the entry removed, or None if there is none."""
        for raw, entry in self._letters():
            if entry.get("job_id") == job_id and self.redis.lrem(keys.DEAD_LETTERS, 1, raw):
                return entry
        return None

    def clear_dead_letters(self) -> int:
        pipe = self.redis.pipeline()
        pipe.llen(keys.DEAD_LETTERS)
        pipe.delete(keys.DEAD_LETTERS)
        count, _ = pipe.execute()
        return int(count)

    # named locks with a token (one reprocess run per kind) and the reports they guard

    def take_lock(self, name: str, token: str, ttl: float) -> bool:
        return bool(self.redis.set(keys.lock(name), token, nx=True, px=int(ttl * 1000)))

    def renew_lock(self, name: str, token: str, ttl: float) -> bool:
        return bool(self._renew(keys=[keys.lock(name)], args=[token, int(ttl * 1000)]))

    def release_lock(self, name: str, token: str) -> None:
        self._release(keys=[keys.lock(name)], args=[token])

    def locked(self, name: str) -> bool:
        return bool(self.redis.exists(keys.lock(name)))

    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None:
        self.redis.set(keys.report(name), json.dumps(report), ex=ttl)

    def report(self, name: str) -> dict[str, Any] | None:
        raw = self.redis.get(keys.report(name))
        return _json_object(raw) if raw is not None else None

    def job_record(self, job_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(keys.job_record(job_id))
        return _json_object(raw) if raw is not None else None

    # chunk streams: a job's output handed over as it comes (workers.chunks)

    def append_chunk(self, name: str, data: bytes) -> None:
        chunks.append_chunk(self.redis, name, data)

    def end_chunks(self, name: str, error: str = "") -> None:
        chunks.end_chunks(self.redis, name, error)

    def read_chunks(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]:
        return chunks.read_chunks(self.redis, chunks.check_name(name), after, block_ms)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def redis_store(
    settings: Settings,
    url: str | None = None,
    storage: Storage | None = None,
    *,
    bounded: bool = False,
) -> RedisStore:
    """The store on `url` (default MCP_MEDIA_REDIS_URL), reached as the settings say (TLS,
    Sentinel), with a client that rides out a broker restart or failover (`bounded`: one that
    raises within the API's broker timeouts instead, for a door whose caller is waiting); its
    sidecars and journal where the settings keep them."""
    from workers.storage import open_storage

    storage = storage or open_storage(settings)
    target = RedisTarget.of(settings, url)
    api = settings.api
    client = (
        bounded_client(target, api.broker_connect_timeout, api.broker_timeout)
        if bounded
        else resilient(target)
    )
    return RedisStore(client, storage.results, settings.jobs.result_ttl, storage.journal)
