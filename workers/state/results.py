"""Finished results: the port every job, gateway and reader holds, its Redis adapter and its
in-memory twin.

Sidecar files (`pipelines.results.Sidecars`, or the bucket's) stay the truth; the index
(Redis, or the twin's memory) makes them fast to find and can be rebuilt from them, so a
flushed Redis loses no finished work.

Putting a result is one act for everyone who waits on it, in this order: the sidecar first
(the truth), then the index entry with its status counted (the status index), then one
pipeline that ends the key's in-flight entry, lists the key among the newest, announces the
result on `keys.EVENTS` and moves its queue's admission state (the running set, the mean
service time: `RedisAdmission.finished`). So each adapter is built on the status index and
the admission adapter it moves: composed, and the callers name this port alone to store.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable
from typing import Protocol

import redis

from pipelines.results import Envelope, ResultFiles, ResultKey, Status
from workers.core import keys
from workers.state.admission import MemoryAdmission, RedisAdmission
from workers.state.status_index import MemoryStatusIndex, RedisStatusIndex

RECENT_KEPT = 200  # result keys kept in keys.RECENT for the jobs page


class Results(Protocol):
    sidecars: ResultFiles

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None:
        """The key's result from the index, else from its sidecar (which re-indexes it);
        `sidecar=False` when the caller knows no sidecar can exist (its input is new)."""
        ...

    def get_many(self, wanted: list[ResultKey]) -> dict[ResultKey, Envelope]:
        """The indexed results of `wanted` (no sidecar read)."""
        ...

    def put(self, envelope: Envelope, *, sidecar: bool = True) -> None:
        """Write the sidecar first (the truth), then index it and announce it. Without
        `sidecar`: only indexed and announced (a failure that no disk had room for)."""
        ...

    def latest_key(self, capability: str, sha256: str) -> ResultKey | None:
        """The newest result key for a sha256, whatever the processor version."""
        ...

    def key_for_job(self, job_id: str) -> ResultKey | None: ...
    def recent_keys(self, limit: int = 20) -> list[ResultKey]:
        """The keys of the newest stored results, newest first, each once."""
        ...


def _each_once(texts: Iterable[str], limit: int) -> list[ResultKey]:
    found: dict[str, None] = {}
    for text in texts:
        found.setdefault(text, None)
        if len(found) >= limit:
            break
    parsed = []
    for text in found:
        with contextlib.suppress(ValueError):
            parsed.append(ResultKey.parse(text))
    return parsed


def _replace(sidecars: ResultFiles, envelope: Envelope, sidecar: bool) -> Status | None:
    """Write the sidecar (unless told not to) and say where the key stood before, by the
    sidecar it had: the status index counts by it when the key's entry has expired."""
    if sidecar:
        return sidecars.replace(envelope)
    before = sidecars.read(envelope.key)
    return before.status if before is not None else None


class RedisResults:
    def __init__(
        self,
        client: redis.Redis[bytes],
        sidecars: ResultFiles,
        result_ttl: int,
        status: RedisStatusIndex,
        admission: RedisAdmission,
    ) -> None:
        self.redis = client
        self.sidecars = sidecars
        self.result_ttl = result_ttl
        self._status = status
        self._admission = admission

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None:
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
        replaced = _replace(self.sidecars, envelope, sidecar)
        self._status.put(envelope, self.result_ttl, replaced)
        self._index(envelope, result=False)
        pipe = self.redis.pipeline()
        pipe.delete(keys.inflight(envelope.key))
        pipe.lpush(keys.RECENT, str(envelope.key))
        pipe.ltrim(keys.RECENT, 0, RECENT_KEPT - 1)
        pipe.publish(keys.EVENTS, json.dumps(envelope.to_json()))
        self._admission.finished(envelope, pipe)
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

    def latest_key(self, capability: str, sha256: str) -> ResultKey | None:
        raw = self.redis.get(keys.latest(capability, sha256))
        return ResultKey.parse(raw.decode()) if raw is not None else None

    def key_for_job(self, job_id: str) -> ResultKey | None:
        raw = self.redis.get(keys.job(job_id))
        return ResultKey.parse(raw.decode()) if raw is not None else None

    def recent_keys(self, limit: int = 20) -> list[ResultKey]:
        raws = self.redis.lrange(keys.RECENT, 0, RECENT_KEPT - 1)
        return _each_once((raw.decode() for raw in raws), limit)


class MemoryResults:
    """The twin, for one process (`--inline` runs, unit tests), over the same sidecars: the
    entries live in the status index twin, as in Redis the index entry is the status
    index's; no events (an in-process wait follows the job's future)."""

    def __init__(
        self, sidecars: ResultFiles, status: MemoryStatusIndex, admission: MemoryAdmission
    ) -> None:
        self.sidecars = sidecars
        self._status = status
        self._admission = admission
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], ResultKey] = {}  # `keys.latest`
        self._jobs: dict[str, ResultKey] = {}  # `keys.job` of stored results
        self._recent: list[ResultKey] = []  # `keys.RECENT`, newest first

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None:
        found = self._status.entry(key)
        if found is not None:
            return found
        if not sidecar or self._admission.inflight_job(key) is not None:
            return None
        found = self.sidecars.read(key)
        if found is not None:
            self._status.enter(found)
            self._index(found)
        return found

    def get_many(self, wanted: list[ResultKey]) -> dict[ResultKey, Envelope]:
        return {key: env for key in wanted if (env := self._status.entry(key)) is not None}

    def put(self, envelope: Envelope, *, sidecar: bool = True) -> None:
        self._status.put(envelope, _replace(self.sidecars, envelope, sidecar))
        self._index(envelope)
        with self._lock:
            self._recent.insert(0, envelope.key)
            del self._recent[RECENT_KEPT:]
        self._admission.finished(envelope)

    def _index(self, envelope: Envelope) -> None:
        with self._lock:
            self._latest[envelope.key.capability.value, envelope.key.sha256] = envelope.key
            if envelope.job_id:
                self._jobs[envelope.job_id] = envelope.key

    def latest_key(self, capability: str, sha256: str) -> ResultKey | None:
        with self._lock:
            return self._latest.get((capability, sha256))

    def key_for_job(self, job_id: str) -> ResultKey | None:
        with self._lock:
            found = self._jobs.get(job_id)
        return found if found is not None else self._admission.job_key(job_id)

    def recent_keys(self, limit: int = 20) -> list[ResultKey]:
        with self._lock:
            recent = list(self._recent)
        return _each_once((str(key) for key in recent), limit)
