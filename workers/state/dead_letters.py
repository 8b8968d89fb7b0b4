"""Dead letters: jobs delivered more often than the cap allows (each delivery killed its
worker), kept for people to read, retry or clear: the port, its Redis adapter (one list,
newest first) and its in-memory twin."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any, Protocol

import redis

from pipelines.outcomes import Outcome
from pipelines.results import ResultKey
from workers.core import keys
from workers.state.redis_values import json_object


class DeadLetters(Protocol):
    def add(self, job_id: str, key: ResultKey, reason: str) -> None: ...
    def newest(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest `limit` dead letters, newest first."""
        ...

    def counts(self) -> dict[str, int]:
        """Dead letters by capability (the newest `keys.DEAD_LETTERS_READ`)."""
        ...

    def count(self) -> int: ...
    def drop(self, job_id: str) -> dict[str, Any] | None:
        """Remove the dead letter of `job_id`; the entry removed, or None if there is none."""
        ...

    def clear(self) -> int:
        """Remove every dead letter; how many there were."""
        ...


def _letter(job_id: str, key: ResultKey, reason: str) -> dict[str, Any]:
    """A dead letter: its job, key and reason, with the outcome code every one shares."""
    return {
        "job_id": job_id,
        "key": str(key),
        "reason": reason,
        "outcome": Outcome.DEAD_LETTERED.value,
        "at": time.time(),
    }


def _by_capability(letters: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(entry.get("key", "")).split(":", 1)[0] for entry in letters))


class RedisDeadLetters:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client

    def add(self, job_id: str, key: ResultKey, reason: str) -> None:
        self.redis.lpush(keys.DEAD_LETTERS, json.dumps(_letter(job_id, key, reason)))

    def newest(self, limit: int = 100) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.redis.lrange(keys.DEAD_LETTERS, 0, limit - 1)]

    def _read(self) -> list[tuple[bytes, dict[str, Any]]]:
        raws = self.redis.lrange(keys.DEAD_LETTERS, 0, keys.DEAD_LETTERS_READ - 1)
        return [(raw, json_object(raw)) for raw in raws]

    def counts(self) -> dict[str, int]:
        return _by_capability([entry for _, entry in self._read()])

    def count(self) -> int:
        return int(self.redis.llen(keys.DEAD_LETTERS))

    def drop(self, job_id: str) -> dict[str, Any] | None:
        for raw, entry in self._read():
            if entry.get("job_id") == job_id and self.redis.lrem(keys.DEAD_LETTERS, 1, raw):
                return entry
        return None

    def clear(self) -> int:
        pipe = self.redis.pipeline()
        pipe.llen(keys.DEAD_LETTERS)
        pipe.delete(keys.DEAD_LETTERS)
        count, _ = pipe.execute()
        return int(count)


class MemoryDeadLetters:
    """The twin, for one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._letters: list[dict[str, Any]] = []  # newest first

    def add(self, job_id: str, key: ResultKey, reason: str) -> None:
        with self._lock:
            self._letters.insert(0, _letter(job_id, key, reason))

    def newest(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._letters[:limit]]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return _by_capability(self._letters[: keys.DEAD_LETTERS_READ])

    def count(self) -> int:
        with self._lock:
            return len(self._letters)

    def drop(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            for index, entry in enumerate(self._letters[: keys.DEAD_LETTERS_READ]):
                if entry.get("job_id") == job_id:
                    return self._letters.pop(index)
        return None

    def clear(self) -> int:
        with self._lock:
            count = len(self._letters)
            self._letters.clear()
            return count
