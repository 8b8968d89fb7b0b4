"""Claims and slots: the port a running job holds, its Redis adapter and its in-memory twin.

A claim makes one worker at a time work on one result key; a slot is one of a cluster-wide
number (the vision provider's concurrency). Both belong to a live holder and expire with
its TTL when it dies, so nothing has to clean up after a crash; the twin keeps that by its
clock. One port because one caller (`workers.jobs`) holds both while a stage runs.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis

from pipelines.results import ResultKey
from workers.core import keys
from workers.state.redis_values import RELEASE, RENEW

# Counting semaphore on a sorted set scored by expiry time: a dead holder's slot expires.
_SEM_ACQUIRE = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('zadd', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
return 0
"""


# Every claim and slot token this process tree takes starts with this (a worker and its pool
# children share it: they fork after this module is loaded). A worker handing its jobs back
# as it stops releases exactly its own, whatever PID namespace or host name it shares.
TREE = secrets.token_hex(8)


def taken_here(token: bytes | str) -> bool:
    """The token was taken by this process tree (a claim's is `pid:TREE-random`)."""
    text = token.decode(errors="replace") if isinstance(token, bytes) else token
    return text.split(":", 1)[-1].startswith(f"{TREE}-")


@dataclass(frozen=True, slots=True)
class Claim:
    key: ResultKey
    token: str


class Claims(Protocol):
    def claim(self, key: ResultKey, ttl: float) -> Claim | None:
        """Take the key, or None while a live owner holds it."""
        ...

    def renew(self, claim: Claim, ttl: float) -> bool: ...

    def reclaim(self, claim: Claim, ttl: float) -> bool:
        """Take back a claim that expired while its job still ran (nobody could renew it
        during a broker outage), unless another delivery took the key meanwhile."""
        ...

    def release(self, claim: Claim) -> None: ...
    def claimed(self, key: ResultKey) -> bool: ...
    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None:
        """One of `limit` slots named `name` for `ttl` seconds: its token, or None if all are
        held."""
        ...

    def release_slot(self, name: str, token: str) -> None: ...


class RedisClaims:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client
        self._release = client.register_script(RELEASE)
        self._renew = client.register_script(RENEW)
        self._sem_acquire = client.register_script(_SEM_ACQUIRE)

    def claim(self, key: ResultKey, ttl: float) -> Claim | None:
        # Tokens are random per claim, never derived from a host name or pid: two workers
        # with the same host name in different PID namespaces must never take each other's
        # live claim. Only the TTL ends a claim whose holder died (renewed while alive).
        token = f"{os.getpid()}:{TREE}-{secrets.token_hex(16)}"  # the pid: for people to read
        if self.redis.set(keys.claim(key), token, nx=True, px=int(ttl * 1000)):
            return Claim(key, token)
        return None

    def renew(self, claim: Claim, ttl: float) -> bool:
        return bool(self._renew(keys=[keys.claim(claim.key)], args=[claim.token, int(ttl * 1000)]))

    def reclaim(self, claim: Claim, ttl: float) -> bool:
        return bool(self.redis.set(keys.claim(claim.key), claim.token, nx=True, px=int(ttl * 1000)))

    def release(self, claim: Claim) -> None:
        self._release(keys=[keys.claim(claim.key)], args=[claim.token])

    def claimed(self, key: ResultKey) -> bool:
        return bool(self.redis.exists(keys.claim(key)))

    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None:
        token = f"{TREE}-{secrets.token_hex(12)}"
        now = time.time()
        ok = self._sem_acquire(keys=[keys.semaphore(name)], args=[now, now + ttl, limit, token])
        return token if ok else None

    def release_slot(self, name: str, token: str) -> None:
        self.redis.zrem(keys.semaphore(name), token)


class MemoryClaims:
    """The twin, for one process: claims and slots expire by `clock` as by Redis's TTLs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._claims: dict[ResultKey, tuple[str, float]] = {}  # key -> (token, expiry)
        self._slots: dict[str, dict[str, float]] = {}  # name -> token -> expiry

    def _held(self, key: ResultKey, now: float) -> tuple[str, float] | None:
        held = self._claims.get(key)
        return held if held is not None and held[1] > now else None

    def claim(self, key: ResultKey, ttl: float) -> Claim | None:
        now = self._clock()
        with self._lock:
            if self._held(key, now) is not None:
                return None
            token = secrets.token_hex(8)
            self._claims[key] = (token, now + ttl)
            return Claim(key, token)

    def renew(self, claim: Claim, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            held = self._held(claim.key, now)
            if held is None or held[0] != claim.token:
                return False
            self._claims[claim.key] = (claim.token, now + ttl)
            return True

    def reclaim(self, claim: Claim, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            if self._held(claim.key, now) is not None:
                return False  # `SET NX`: any live holder, ourselves included, keeps it
            self._claims[claim.key] = (claim.token, now + ttl)
            return True

    def release(self, claim: Claim) -> None:
        with self._lock:
            held = self._claims.get(claim.key)
            if held is not None and held[0] == claim.token:
                del self._claims[claim.key]

    def claimed(self, key: ResultKey) -> bool:
        now = self._clock()
        with self._lock:
            return self._held(key, now) is not None

    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None:
        now = self._clock()
        with self._lock:
            slots = self._slots.setdefault(name, {})
            for token in [t for t, expiry in slots.items() if expiry <= now]:
                del slots[token]
            if len(slots) >= limit:
                return None
            token = secrets.token_hex(12)
            slots[token] = now + ttl
            return token

    def release_slot(self, name: str, token: str) -> None:
        with self._lock:
            self._slots.get(name, {}).pop(token, None)
