"""The status index: each result key's entry, and the counters of keys by the status they
stand at (the jobs page's tiles, `/metrics`, `mcp-media status`): the port its readers
hold, its Redis adapter and its in-memory twin.

Readers only count (`StatusIndex`); the results port writes through its adapter's `put`
(`workers.state.results`), and the admission port reads an entry (a done result settles a
submission). In Redis an entry expires with the result TTL; the counters, and the status
each key is counted at, last until Redis loses its data (one hash field per key stored).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Protocol

import redis

from pipelines.results import Envelope, ResultKey
from workers.core import keys

# Index a result and move its key's count from the status it stood at to the one it has
# now: the counters say how many keys stand at each status, so a job that failed and then
# succeeded on retry counts as done only. Where a key stood is kept beside the counters
# (`keys.counted`), as long as they are: the index entry expires with the result TTL, and a
# key stored again after that must not be counted twice. A key counted by an older version
# (no field yet) stood where its index entry says, if it has one.
# KEYS: result, counts, counted.  ARGV: envelope JSON, ttl, status, result key text.
_INDEX_COUNTED = """
local was = redis.call('hget', KEYS[3], ARGV[4])
if not was then
  local old = redis.call('get', KEYS[1])
  if old then
    local ok, status = pcall(function() return cjson.decode(old)['status'] end)
    if ok and type(status) == 'string' then was = status end
  end
end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('hset', KEYS[3], ARGV[4], ARGV[3])
if was == ARGV[3] then return 0 end
if was and tonumber(redis.call('hget', KEYS[2], was) or '0') > 0 then
  redis.call('hincrby', KEYS[2], was, -1)
end
redis.call('hincrby', KEYS[2], ARGV[3], 1)
return 1
"""


class StatusIndex(Protocol):
    def counts(self, capability: str) -> dict[str, int]:
        """How many keys of `capability` stand at each status (none at 0)."""
        ...


class RedisStatusIndex:
    """Result entries indexed with their status counted (see `_INDEX_COUNTED`)."""

    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client
        self._index_counted = client.register_script(_INDEX_COUNTED)

    def put(self, envelope: Envelope, ttl: int) -> None:
        """Index `envelope` for `ttl` seconds and count its key at its status."""
        capability = envelope.key.capability.value
        self._index_counted(
            keys=[keys.result(envelope.key), keys.counts(capability), keys.counted(capability)],
            args=[json.dumps(envelope.to_json()), ttl, envelope.status.value, str(envelope.key)],
        )

    def counts(self, capability: str) -> dict[str, int]:
        raw = self.redis.hgetall(keys.counts(capability))
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}


class MemoryStatusIndex:
    """The twin, for one process: the entries, and each key counted once, at the status it
    was last put at (as `_INDEX_COUNTED`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[ResultKey, Envelope] = {}
        self._counted: dict[ResultKey, str] = {}  # `keys.counted`
        self._counts: dict[str, Counter[str]] = {}  # `keys.counts`

    def put(self, envelope: Envelope) -> None:
        key, status = envelope.key, envelope.status.value
        with self._lock:
            before = self._entries.get(key)
            was = self._counted.get(key) or (before.status.value if before else None)
            self._entries[key] = envelope
            self._counted[key] = status
            if was == status:
                return
            counts = self._counts.setdefault(key.capability.value, Counter())
            if was is not None and counts[was] > 0:
                counts[was] -= 1
            counts[status] += 1

    def enter(self, envelope: Envelope) -> None:
        """The entry alone, counted nowhere: a result read back from its sidecar."""
        with self._lock:
            self._entries[envelope.key] = envelope

    def entry(self, key: ResultKey) -> Envelope | None:
        with self._lock:
            return self._entries.get(key)

    def counts(self, capability: str) -> dict[str, int]:
        with self._lock:
            found = self._counts.get(capability, Counter())
            return {status: n for status, n in found.items() if n}
