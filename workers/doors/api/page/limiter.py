"""Login attempts per client: a token bucket per address, in a bounded table.

Every attempt takes a token, right key or wrong, and the bucket is checked before the key:
once a client has spent its burst, even the right key waits, so the key cannot be guessed
faster than the refill. A bucket that has refilled is the same as no bucket, so it is pruned;
past `cap` addresses the newcomers share one overflow bucket (many addresses cannot buy
many bursts, nor grow the table). IPv6 clients are counted by their /64, which one host
usually owns whole.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

LOGIN_BURST = 30
LOGIN_REFILL_SECONDS = 2.0  # one attempt back every 2 s: 30 a minute once the burst is spent
DEFAULT_CAP = 1024
OVERFLOW = "*"


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


def client_key(address: str | None) -> str:
    """The address a bucket is kept for: IPv4 as is, IPv6 by its /64."""
    if not address:
        return OVERFLOW
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class LoginLimiter:
    def __init__(
        self,
        burst: int = LOGIN_BURST,
        refill_seconds: float = LOGIN_REFILL_SECONDS,
        cap: int = DEFAULT_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.cap = cap
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()  # least recently tried first
        self._overflow = _Bucket(float(burst), clock())

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, address: str | None) -> int:
        """Spend one attempt for this client: 0 if it may try now, else the seconds to wait."""
        now = self._clock()
        key = client_key(address)
        with self._lock:
            bucket = self._bucket(key, now)
            bucket.tokens = min(
                float(self.burst), bucket.tokens + (now - bucket.stamp) / self.refill_seconds
            )
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0
            return max(1, math.ceil((1.0 - bucket.tokens) * self.refill_seconds))

    def _bucket(self, key: str, now: float) -> _Bucket:
        found = self._buckets.get(key)
        if found is not None:
            self._buckets.move_to_end(key)
            return found
        if key == OVERFLOW:
            return self._overflow
        full_after = self.burst * self.refill_seconds
        while self._buckets:  # refilled buckets are no different from none
            oldest = next(iter(self._buckets.values()))
            if now - oldest.stamp < full_after:
                break
            self._buckets.popitem(last=False)
        if len(self._buckets) >= self.cap:
            return self._overflow
        bucket = self._buckets[key] = _Bucket(float(self.burst), now)
        return bucket
