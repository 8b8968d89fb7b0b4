"""What the broker says of the cluster: its clock, the workers that announced themselves,
the queues' lengths and pause state, and the newest stored results (the jobs page's list).

The base of `workers.state.store.RedisStore`: everything here reads or flips state that others
write (the heartbeat, the result store's `put`), and holds no result of its own.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

import redis

from pipelines.results import ResultKey
from workers.core import keys
from workers.core.announcements import WorkerInfo

# Workers announce themselves in `keys.WORKERS` every few seconds (the heartbeat of
# workers.runtime.recovery); one not seen for this long is gone (killed, frozen, cut off).
WORKER_FRESH_SECONDS = 15.0
RECENT_KEPT = 200  # result keys kept in keys.RECENT for the jobs page


class ClusterView:
    """The cluster as its broker sees it: who serves which queue, and how much is waiting."""

    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client

    def now(self) -> float:
        """The broker's clock: workers on other nodes announce themselves by it too."""
        seconds, micros = self.redis.time()
        return float(seconds) + float(micros) / 1e6

    def live_workers(self, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """Workers that announced themselves within `max_age` seconds, by name."""
        now = self.now()
        workers = []
        for raw_name, raw in self.redis.hgetall(keys.WORKERS).items():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            info = WorkerInfo.from_announcement(raw_name.decode(), data, now)
            if info.age_s <= max_age:
                workers.append(info)
        return sorted(workers, key=lambda w: w.name)

    def serving(self, queue: str, max_age: float = WORKER_FRESH_SECONDS) -> list[WorkerInfo]:
        """The live workers that consume `queue` (none: its jobs wait until one starts)."""
        return [w for w in self.live_workers(max_age) if queue in w.queues]

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        """Jobs waiting in each queue (sent, not yet taken by a worker)."""
        pipe = self.redis.pipeline()
        for queue in queues:
            pipe.llen(queue)
        return {q: int(n) for q, n in zip(queues, pipe.execute(), strict=True)}

    def recent_keys(self, limit: int = 20) -> list[ResultKey]:
        """The keys of the newest stored results, newest first, each once."""
        found: dict[str, None] = {}
        for raw in self.redis.lrange(keys.RECENT, 0, RECENT_KEPT - 1):
            found.setdefault(raw.decode(), None)
            if len(found) >= limit:
                break
        parsed = []
        for text in found:
            with contextlib.suppress(ValueError):
                parsed.append(ResultKey.parse(text))
        return parsed

    def paused_queues(self) -> set[str]:
        """Queues paused from the jobs page: workers stop consuming them until resumed."""
        return {raw.decode() for raw in self.redis.smembers(keys.PAUSED)}

    def set_paused(self, queue: str, paused: bool) -> None:
        if paused:
            self.redis.sadd(keys.PAUSED, queue)
        else:
            self.redis.srem(keys.PAUSED, queue)
