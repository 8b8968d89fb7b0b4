"""What only the broker knows of the cluster: its clock, the workers that announced
themselves (written by each worker's heartbeat, `workers.runtime.heartbeat`) and how many
jobs wait in each queue (Celery's lists). The part of the read-only cluster view
(`workers.core.cluster_view`) that no other port holds: its Redis adapter and its
in-memory twin.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import redis

from workers.core import keys


def broker_now(client: redis.Redis[bytes]) -> float:
    """The broker's clock: workers on other nodes announce themselves by it, and admission
    decides by it, so that no node's clock skew moves either."""
    seconds, micros = client.time()
    return float(seconds) + float(micros) / 1e6


class Roster(Protocol):
    def now(self) -> float:
        """The clock the announcements' `seen` is read against."""
        ...

    def announcements(self) -> dict[str, dict[str, Any]]:
        """Each worker's last announcement, by name, however old (malformed ones left out)."""
        ...

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        """Jobs waiting in each queue (sent, not yet taken by a worker)."""
        ...


class RedisRoster:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client

    def now(self) -> float:
        return broker_now(self.redis)

    def announcements(self) -> dict[str, dict[str, Any]]:
        found = {}
        for raw_name, raw in self.redis.hgetall(keys.WORKERS).items():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                found[raw_name.decode()] = data
        return found

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        pipe = self.redis.pipeline()
        for queue in queues:
            pipe.llen(queue)
        return {q: int(n) for q, n in zip(queues, pipe.execute(), strict=True)}


class MemoryRoster:
    """The twin, for one process: announcements made here (`announce`, stamped `seen` by
    `clock` unless they say when), and queue lengths as `waiting` counts them (the
    admission twin's jobs admitted and not started: no message list exists without a
    broker)."""

    def __init__(
        self, waiting: Callable[[str], int], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._waiting = waiting
        self._clock = clock
        self._lock = threading.Lock()
        self._announced: dict[str, str] = {}  # name -> JSON, as a heartbeat writes it

    def announce(self, name: str, announcement: dict[str, Any]) -> None:
        with self._lock:
            self._announced[name] = json.dumps({"seen": self._clock(), **announcement})

    def now(self) -> float:
        return self._clock()

    def announcements(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: json.loads(raw) for name, raw in self._announced.items()}

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        return {queue: self._waiting(queue) for queue in queues}
