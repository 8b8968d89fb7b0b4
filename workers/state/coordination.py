"""Coordination: named locks, named reports and paused queues, the small shared flags by
which processes on any node steer each other: the port, its Redis adapter and its
in-memory twin.

A lock (one reprocess run per media kind) is held with a token and expires with its
holder; a report (a reprocess run's tally, a job's progress, a request to cancel a job)
is a JSON object that expires by itself; a paused queue is consumed by no worker until it
is resumed. One port because their users take them together: reprocess holds a lock and
writes its report beside it, the jobs page reads both and pauses queues, a worker reads
the pauses and a job's cancel report.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import redis

from workers.core import keys
from workers.state.redis_values import RELEASE, RENEW, json_object


class Coordination(Protocol):
    def take_lock(self, name: str, token: str, ttl: float) -> bool: ...
    def renew_lock(self, name: str, token: str, ttl: float) -> bool: ...
    def release_lock(self, name: str, token: str) -> None: ...
    def locked(self, name: str) -> bool: ...
    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None: ...
    def report(self, name: str) -> dict[str, Any] | None: ...
    def set_paused(self, queue: str, paused: bool) -> None: ...
    def paused_queues(self) -> set[str]:
        """Queues paused from the jobs page: workers stop consuming them until resumed."""
        ...


class RedisCoordination:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client
        self._release = client.register_script(RELEASE)
        self._renew = client.register_script(RENEW)

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
        return json_object(raw) if raw is not None else None

    def set_paused(self, queue: str, paused: bool) -> None:
        if paused:
            self.redis.sadd(keys.PAUSED, queue)
        else:
            self.redis.srem(keys.PAUSED, queue)

    def paused_queues(self) -> set[str]:
        return {raw.decode() for raw in self.redis.smembers(keys.PAUSED)}


class MemoryCoordination:
    """The twin, for one process: locks and reports expire by `clock` as by Redis's TTLs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._locks: dict[str, tuple[str, float]] = {}  # name -> (token, expiry)
        self._reports: dict[str, tuple[str, float]] = {}  # name -> (JSON, expiry)
        self._paused: set[str] = set()

    def _holder(self, name: str, now: float) -> str | None:
        held = self._locks.get(name)
        return held[0] if held is not None and held[1] > now else None

    def take_lock(self, name: str, token: str, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            if self._holder(name, now) is not None:
                return False
            self._locks[name] = (token, now + ttl)
            return True

    def renew_lock(self, name: str, token: str, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            if self._holder(name, now) != token:
                return False
            self._locks[name] = (token, now + ttl)
            return True

    def release_lock(self, name: str, token: str) -> None:
        now = self._clock()
        with self._lock:
            if self._holder(name, now) == token:
                del self._locks[name]

    def locked(self, name: str) -> bool:
        now = self._clock()
        with self._lock:
            return self._holder(name, now) is not None

    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None:
        with self._lock:
            self._reports[name] = (json.dumps(report), self._clock() + ttl)

    def report(self, name: str) -> dict[str, Any] | None:
        now = self._clock()
        with self._lock:
            found = self._reports.get(name)
        return json_object(found[0].encode()) if found is not None and found[1] > now else None

    def set_paused(self, queue: str, paused: bool) -> None:
        with self._lock:
            (self._paused.add if paused else self._paused.discard)(queue)

    def paused_queues(self) -> set[str]:
        with self._lock:
            return set(self._paused)
