"""The status index: each result key's entry, and the counters of keys by the status they
stand at (the jobs page's tiles, `/metrics`, `mcp-media status`): the port its readers
hold, its Redis adapter and its in-memory twin.

Readers only count (`StatusIndex`); the results port writes through its adapter's `put`
(`workers.state.results`), and the admission port reads an entry (a done result settles a
submission). In Redis an entry expires with the result TTL; the counters last until Redis
loses its data, and keep nothing per key: where a key stood is its entry's status while
the entry lives, and its sidecar's (the truth, read as the new result replaces it) after.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

import redis

from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys

ENTRY_TTL = 7 * 24 * 3600  # the twin's default, as JOBS__RESULT_TTL's

# Index a result and move its key's count from the status it stood at to the one it has
# now: the counters say how many keys stand at each status, so a job that failed and then
# succeeded on retry counts as done only. Where the key stood: the mark the previous
# version kept per key in `keys.counted` (taken, so that hash only shrinks), else the
# status of its index entry, else (the entry expired with the result TTL) the status of the
# sidecar this result replaced, which the caller read as it wrote the new one.
# KEYS: result, counts, counted.
# ARGV: envelope JSON, ttl, status, result key text, the replaced sidecar's status or ''.
_INDEX_COUNTED = """
local was = redis.call('hget', KEYS[3], ARGV[4])
if was then
  redis.call('hdel', KEYS[3], ARGV[4])
else
  local old = redis.call('get', KEYS[1])
  if old then
    local ok, status = pcall(function() return cjson.decode(old)['status'] end)
    if ok and type(status) == 'string' then was = status end
  end
  if not was and ARGV[5] ~= '' then was = ARGV[5] end
end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
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

    def put(self, envelope: Envelope, ttl: int, replaced: Status | None = None) -> None:
        """Index `envelope` for `ttl` seconds and count its key at its status; `replaced`:
        the status of the sidecar it replaced (where the key stood if its entry expired)."""
        capability = envelope.key.capability.value
        self._index_counted(
            keys=[keys.result(envelope.key), keys.counts(capability), keys.counted(capability)],
            args=[
                json.dumps(envelope.to_json()),
                ttl,
                envelope.status.value,
                str(envelope.key),
                replaced.value if replaced is not None else "",
            ],
        )

    def counts(self, capability: str) -> dict[str, int]:
        raw = self.redis.hgetall(keys.counts(capability))
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}


class MemoryStatusIndex:
    """The twin, for one process: the entries, expiring `ttl` seconds after they were put
    by `clock`, and each key counted once, at the status it was last put at (as
    `_INDEX_COUNTED`, without the previous version's marks)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = ENTRY_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[ResultKey, tuple[Envelope, float]] = {}  # entry, expiry
        self._counts: dict[str, Counter[str]] = {}  # `keys.counts`

    def _live(self, key: ResultKey) -> Envelope | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if found[1] <= self._clock():
            del self._entries[key]
            return None
        return found[0]

    def put(self, envelope: Envelope, replaced: Status | None = None) -> None:
        key, status = envelope.key, envelope.status.value
        with self._lock:
            before = self._live(key)
            was = before.status.value if before is not None else None
            if was is None and replaced is not None:
                was = replaced.value
            self._entries[key] = (envelope, self._clock() + self._ttl)
            if was == status:
                return
            counts = self._counts.setdefault(key.capability.value, Counter())
            if was is not None and counts[was] > 0:
                counts[was] -= 1
            counts[status] += 1

    def enter(self, envelope: Envelope) -> None:
        """The entry alone, counted nowhere: a result read back from its sidecar."""
        with self._lock:
            self._entries[envelope.key] = (envelope, self._clock() + self._ttl)

    def entry(self, key: ResultKey) -> Envelope | None:
        with self._lock:
            return self._live(key)

    def counts(self, capability: str) -> dict[str, int]:
        with self._lock:
            found = self._counts.get(capability, Counter())
            return {status: n for status, n in found.items() if n}
