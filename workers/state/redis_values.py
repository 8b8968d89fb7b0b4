"""Two kinds of value every Redis adapter here keeps: keys held with a token (a claim, a
named lock, a key's job in flight), released or extended only by their holder, each in one
step; and JSON objects, read back leniently."""

from __future__ import annotations

import json
from typing import Any

# Delete or extend a key only if it still holds our token.
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


def json_object(raw: bytes) -> dict[str, Any]:
    """A JSON object read back from Redis; anything else (another writer's garbage) is `{}`."""
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
