"""The status index: each result key's entry in Redis, and the counters of keys by the
status they stand at (the jobs page's tiles, `/metrics`, `mcp-media status`).

An entry expires with the result TTL; the counters, and the status each key is counted at,
last until Redis loses its data (one hash field per key stored)."""

from __future__ import annotations

import json

import redis

from pipelines.results import Envelope
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


class StatusIndex:
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
        """How many keys of `capability` stand at each status (none at 0)."""
        raw = self.redis.hgetall(keys.counts(capability))
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}
