"""Where results, claims and in-flight jobs live: the `ResultStore` port and its Redis adapter.

Sidecar files (pipelines.results.Sidecars) stay the truth; everything in Redis can be rebuilt
from them or expires by itself, so a flushed Redis loses no finished work. The in-memory
twin (`workers.state.memory.LocalStore`) serves `--inline` runs and unit tests.
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

from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultFiles, ResultKey
from workers.broker.target import RedisTarget, bounded_client, resilient
from workers.core import keys
from workers.core.settings import Settings
from workers.core.wait_estimate import Admitted, WaitBudget
from workers.files.journal import JobJournal
from workers.state import chunks
from workers.state.admission import RedisAdmission
from workers.state.chunks import Chunk
from workers.state.cluster_view import RECENT_KEPT
from workers.state.status_index import StatusIndex

if TYPE_CHECKING:
    from workers.files.shared import Storage

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


class RedisStore(RedisAdmission):
    """Results for the whole cluster: Redis for speed and coordination, sidecars for truth.
    Its bases admit jobs to the queues (`workers.state.admission`) and read the cluster
    (`workers.state.cluster_view`)."""

    def __init__(
        self,
        client: redis.Redis[bytes],
        sidecars: ResultFiles,
        result_ttl: int,
        journal: JobJournal,
    ) -> None:
        super().__init__(client, result_ttl)
        self.sidecars = sidecars
        # Submitted, unfinished jobs where every node's recovery sweep reads them.
        self.journal = journal
        self.status = StatusIndex(client)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._sem_acquire = client.register_script(_SEM_ACQUIRE)

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
        self.status.put(envelope, self.result_ttl)
        self._index(envelope, result=False)
        pipe = self.redis.pipeline()
        pipe.delete(keys.inflight(envelope.key))
        pipe.lpush(keys.RECENT, str(envelope.key))
        pipe.ltrim(keys.RECENT, 0, RECENT_KEPT - 1)
        pipe.publish(keys.EVENTS, json.dumps(envelope.to_json()))
        self.finished(envelope, pipe)
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
        entry["outcome"] = Outcome.DEAD_LETTERED.value  # every dead letter's code
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
        return self.status.counts(capability)

    def dead_letter_count(self) -> int:
        return int(self.redis.llen(keys.DEAD_LETTERS))

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

    # chunk streams: a job's output handed over as it comes (workers.state.chunks)

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
    from workers.files.shared import open_storage

    storage = storage or open_storage(settings)
    target = RedisTarget.of(settings, url)
    api = settings.api
    client = (
        bounded_client(target, api.broker_connect_timeout, api.broker_timeout)
        if bounded
        else resilient(target)
    )
    return RedisStore(client, storage.results, settings.jobs.result_ttl, storage.journal)
