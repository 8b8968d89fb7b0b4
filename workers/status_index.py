"""The status index: each result key's entry in Redis, and the counters of keys by the
status they stand at (the jobs page's tiles, `/metrics`, `mcp-media status`)."""

from __future__ import annotations

import json

import redis

from pipelines.results import Envelope
from workers import keys

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


class StatusIndex:
    """Result entries indexed with their status counted (see `_INDEX_COUNTED`)."""

    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client
        self._index_counted = client.register_script(_INDEX_COUNTED)

    def put(self, envelope: Envelope, ttl: int) -> None:
        """Index `envelope` for `ttl` seconds and count its key at its status."""
        capability = envelope.key.capability.value
        self._index_counted(
            keys=[keys.result(envelope.key), keys.counts(capability)],
            args=[json.dumps(envelope.to_json()), ttl, envelope.status.value],
        )

    def counts(self, capability: str) -> dict[str, int]:
        """How many keys of `capability` stand at each status (none at 0)."""
        raw = self.redis.hgetall(keys.counts(capability))
        return {k.decode(): int(v) for k, v in raw.items() if int(v)}
