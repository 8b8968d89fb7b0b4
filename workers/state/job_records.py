"""Job records and deliveries: the port, its Redis adapter and its in-memory twin.

A job's record is what re-sending it needs if its worker dies (task, arguments, queue,
limits), written by the gateway as it sends the job and read by recovery and by the jobs
page (a dead letter's input). A job's deliveries are counted against the redelivery cap,
so that a job which kills its worker ends on the dead-letter list instead of forever.
Both expire by themselves (in the twin: by its clock).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import redis

from workers.core import keys
from workers.state.redis_values import json_object


class JobRecords(Protocol):
    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None: ...
    def forget_record(self, job_id: str) -> None: ...
    def job_record(self, job_id: str) -> dict[str, Any] | None: ...
    def count_delivery(self, job_id: str, ttl: int) -> int:
        """One more delivery of `job_id`: how many there were, this one included."""
        ...

    def uncount_delivery(self, job_id: str) -> None:
        """A delivery that ran nothing (its key was claimed): not counted against the cap."""
        ...


class RedisJobRecords:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client

    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None:
        self.redis.set(keys.job_record(job_id), json.dumps(record), ex=ttl)

    def forget_record(self, job_id: str) -> None:
        with contextlib.suppress(redis.RedisError):
            self.redis.delete(keys.job_record(job_id))

    def job_record(self, job_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(keys.job_record(job_id))
        return json_object(raw) if raw is not None else None

    def count_delivery(self, job_id: str, ttl: int) -> int:
        pipe = self.redis.pipeline()
        pipe.incr(keys.deliveries(job_id))
        pipe.expire(keys.deliveries(job_id), ttl)
        count, _ = pipe.execute()
        return int(count)

    def uncount_delivery(self, job_id: str) -> None:
        self.redis.decr(keys.deliveries(job_id))


class MemoryJobRecords:
    """The twin, for one process: records and counts expire by `clock` as by Redis's TTLs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, tuple[dict[str, Any], float]] = {}  # id -> (record, expiry)
        self._deliveries: dict[str, tuple[int, float]] = {}  # id -> (count, expiry)

    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None:
        with self._lock:
            self._records[job_id] = (json.loads(json.dumps(record)), self._clock() + ttl)

    def forget_record(self, job_id: str) -> None:
        with self._lock:
            self._records.pop(job_id, None)

    def job_record(self, job_id: str) -> dict[str, Any] | None:
        now = self._clock()
        with self._lock:
            found = self._records.get(job_id)
            return json.loads(json.dumps(found[0])) if found and found[1] > now else None

    def _count(self, job_id: str, now: float) -> tuple[int, float]:
        count, expiry = self._deliveries.get(job_id, (0, float("inf")))
        return (count, expiry) if expiry > now else (0, float("inf"))

    def count_delivery(self, job_id: str, ttl: int) -> int:
        now = self._clock()
        with self._lock:
            count = self._count(job_id, now)[0] + 1
            self._deliveries[job_id] = (count, now + ttl)
            return count

    def uncount_delivery(self, job_id: str) -> None:
        now = self._clock()
        with self._lock:
            count, expiry = self._count(job_id, now)
            self._deliveries[job_id] = (count - 1, expiry)  # DECR keeps the key's TTL
