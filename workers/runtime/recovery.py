"""Bringing back jobs whose worker died, in seconds rather than after the visibility timeout.

Every submitted job has a record (task, arguments, queue, limits). While a worker holds a
job (reserved or running), its main process renews a short lease on it. When a worker dies
(SIGKILL, OOM, node loss) its leases stop being renewed; any live worker's reaper then
re-sends those jobs with the same id. The stale copy that Redis restores later, after the
visibility timeout, finds the result already written and does nothing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from pipelines.results import ResultKey
from workers import keys
from workers.store import RedisStore

log = logging.getLogger("mcp_media.recovery")

LEASE_SECONDS = 15.0
HEARTBEAT_SECONDS = 3.0
# Between beats, a worker announces itself again as soon as how busy it is changes, so
# `status` shows a job running (or finished) within this, not within a whole beat.
BUSY_CHECK_SECONDS = 0.5

# Take expired leases atomically so that one reaper alone re-sends a job.
_TAKE_EXPIRED = """
local ids = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(ids) do redis.call('zrem', KEYS[1], id) end
return ids
"""


def renew_leases(
    client: redis.Redis[bytes], job_ids: list[str], lease: float = LEASE_SECONDS
) -> None:
    if job_ids:
        expiry = time.time() + lease
        client.zadd(keys.LEASES, dict.fromkeys(job_ids, expiry))


def drop_lease(client: redis.Redis[bytes], job_id: str) -> None:
    client.zrem(keys.LEASES, job_id)


def reap(app: Celery, store: RedisStore) -> list[str]:
    """Re-send every job whose lease expired and whose result is not written yet."""
    take = store.redis.register_script(_TAKE_EXPIRED)
    resent = []
    for raw in take(keys=[keys.LEASES], args=[time.time()]):
        job_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        record_raw = store.redis.get(keys.job_record(job_id))
        if record_raw is None:
            continue
        record = json.loads(record_raw)
        key = ResultKey.parse(record["kwargs"]["key"])
        envelope = store.get(key)
        if envelope is not None and envelope.status.finished:
            continue
        app.send_task(
            record["task"],
            kwargs=record["kwargs"],
            task_id=job_id,
            queue=record["queue"],
            soft_time_limit=record["soft"],
            time_limit=record["hard"],
        )
        log.warning("re-sent job %s (%s): its worker stopped renewing its lease", job_id, key)
        resent.append(job_id)
    return resent


def _busy() -> dict[str, Any]:
    """How busy this worker is: jobs running (in all and per queue) and reserved."""
    from celery.worker import state

    active = list(state.active_requests)
    by_queue: dict[str, int] = {}
    for request in active:
        queue = (getattr(request, "delivery_info", None) or {}).get("routing_key")
        if queue:
            by_queue[queue] = by_queue.get(queue, 0) + 1
    return {
        "active": len(active),
        "reserved": len(state.reserved_requests),
        "active_by_queue": by_queue,
    }


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process and its children (a prefork pool), in MiB; Linux only."""
    total_kib = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for proc in [str(pid), *children]:
        try:
            status = Path(f"/proc/{proc}/status").read_text()
        except OSError:
            continue  # a child that just exited
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return round(total_kib / 1024, 1)


class Heartbeat:
    """Runs in a worker's main process: renews its jobs' leases and reaps dead workers' jobs."""

    def __init__(self, app: Celery, store: RedisStore) -> None:
        self.app = app
        self.store = store
        self._stop = threading.Event()
        self._started_at = time.time()
        self._announced: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, name="mcp-media-heartbeat", daemon=True)

    def start(self) -> None:
        # Announce at once (before the worker logs "ready."), so that a client waiting for
        # a job already sees who serves its queue.
        try:
            self._announce()
        except Exception:
            log.warning("could not announce this worker; the heartbeat retries", exc_info=True)
        self._thread.start()

    def lease(self, job_id: str) -> None:
        try:
            renew_leases(self.store.redis, [job_id])
        except redis.RedisError:
            log.warning("could not lease job %s", job_id, exc_info=True)

    def stop(self) -> None:
        self._stop.set()

    def _announce(self) -> None:
        """Register this worker (queues, pool, processes, threads, how busy) in keys.WORKERS:
        `mcp-media status` and the client (who serves which queue) read it from there."""
        info = self.app.conf.mcp_media_worker
        busy = _busy()
        announcement = {
            **info,
            "started_at": info.get("started_at", self._started_at),
            **busy,
            "rss_mib": rss_mib(os.getpid()),
            "seen": self.store.now(),  # the broker's clock, as readers compare with it
        }
        self.store.redis.hset(keys.WORKERS, info["name"], json.dumps(announcement))
        self._announced = busy

    def forget(self) -> None:
        self.store.redis.hdel(keys.WORKERS, self.app.conf.mcp_media_worker["name"])

    def _run(self) -> None:
        from celery.worker import state

        last_beat = time.monotonic()
        while not self._stop.wait(BUSY_CHECK_SECONDS):
            try:
                if time.monotonic() - last_beat < HEARTBEAT_SECONDS:
                    if _busy() != self._announced:
                        self._announce()
                    continue
                last_beat = time.monotonic()
                self._announce()
                held = [r.id for r in list(state.reserved_requests) + list(state.active_requests)]
                renew_leases(self.store.redis, held)
                reap(self.app, self.store)
            except Exception:  # the broker may be restarting: try again next beat
                log.warning("heartbeat failed", exc_info=True)
