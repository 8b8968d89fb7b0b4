"""The heartbeat of a worker's main process: it announces the worker, leases the jobs it
holds, reaps the jobs of dead workers, sweeps the job journal, and makes its own consumer
reconnect when it stops consuming. Nothing here runs in Celery's event loop."""

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
from redis.backoff import NoBackoff
from redis.retry import Retry

from workers.broker.target import RedisTarget
from workers.core import keys
from workers.core.capabilities import lane_queues
from workers.files.journal import JobJournal
from workers.runtime.recovery import (
    HEARTBEAT_SECONDS,
    STALL_SECONDS,
    SWEEP_EVERY,
    Recovery,
    held_jobs,
    renew_leases,
)
from workers.state.shared_state import SharedState

log = logging.getLogger("mcp_media.recovery")

# Between beats, a change in how busy the worker is (or a queue paused or resumed) gets
# announced within this long.
BUSY_CHECK_SECONDS = 0.5
QUICK_SECONDS = 2.0  # socket bound of the one call a stopping worker makes


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
    def __init__(
        self,
        app: Celery,
        client: redis.Redis[bytes],
        state: SharedState,
        journal: JobJournal,
        consumer: Any = None,
    ) -> None:
        self.app = app
        self.redis = client  # leases, announcements and the sweep lock: the runtime's own keys
        self.state = state
        self.recovery = Recovery(app, client, state, journal)
        self.consumer = consumer
        self.received = time.monotonic()
        self._idle_since: float | None = None
        self._to_lease: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._started_at = time.time()
        self._announced: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, name="mcp-media-heartbeat", daemon=True)

    @property
    def queues(self) -> list[str]:
        return list(self.app.conf.mcp_media_worker["queues"])

    def consuming_lanes(self) -> list[str]:
        """The lane queues of the configured queues this worker consumes now."""
        selected = self.app.amqp.queues.consume_from
        return [q for q in lane_queues(self.queues) if q in selected]

    def consuming(self) -> list[str]:
        """The configured queues this worker consumes now: a paused one is not (a queue
        counts as consumed while either of its lanes is)."""
        lanes = self.consuming_lanes()
        return [q for q in self.queues if any(lane in lanes for lane in lane_queues([q]))]

    def follow_pauses(self) -> None:
        """Stop consuming the queues paused on the jobs page (both lanes of each); consume
        them again once resumed.

        The page tells live workers at once (Celery's cancel_consumer/add_consumer); this
        makes a pause hold for a worker started later, and its consumer's reconnects keep
        the queues it deselected. Run in the consumer's event loop, never here."""
        consumer = self.consumer
        if consumer is None:
            return
        # What it consumes first, the pauses second: a pause or resume the page sends in
        # between is then seen as already done, never undone for a beat.
        consuming = set(self.consuming_lanes())
        paused = self.state.coordination.paused_queues()
        for queue in self.queues:
            for lane in lane_queues([queue]):
                if queue in paused and lane in consuming:
                    log.warning("queue %s is paused: no longer consuming it", lane)
                    consumer.call_soon(consumer.cancel_task_queue, lane)
                elif queue not in paused and lane not in consuming:
                    log.warning("queue %s was resumed: consuming it again", lane)
                    consumer.call_soon(consumer.add_task_queue, lane)

    def pool_size(self) -> int | None:
        """Processes (or threads) of the pool now: pool_grow/pool_shrink change it."""
        pool = getattr(self.consumer, "pool", None)
        try:
            return int(pool.num_processes) if pool is not None else None
        except (AttributeError, TypeError, ValueError):
            return None

    def start(self) -> None:
        # Announce at once (before the worker logs "ready."), so that a client waiting for
        # a job already sees who serves its queue.
        try:
            self.follow_pauses()
            self._announce()
        except Exception:
            log.warning("could not announce this worker; the heartbeat retries", exc_info=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def lease(self, job_id: str) -> None:
        """Lease a job this worker just received, from the heartbeat thread, at once.

        Called in the consumer's event loop (task_received): it must never wait on Redis
        there. A Redis call retried through a broker outage (about 30 s) would freeze the
        consumer: it would neither notice the lost connection nor take messages, and every
        claim and lease of this worker would expire meanwhile."""
        self.received = time.monotonic()
        with self._lock:
            self._to_lease.add(job_id)
        self._wake.set()

    def _lease_received(self) -> None:
        with self._lock:
            job_ids, self._to_lease = list(self._to_lease), set()
        try:
            renew_leases(self.redis, job_ids)
        except Exception:
            with self._lock:
                self._to_lease.update(job_ids)  # the next beat leases them with the rest
            raise

    def watch(self, held: int, now: float | None = None) -> bool:
        """True (and the consumer told to reconnect) when this worker holds no job, its
        queues have had messages waiting for STALL_SECONDS and it received none of them.

        A healthy consumer with free capacity takes a waiting message within milliseconds;
        one that does not (a consumer left without credit or without its socket in the event
        loop after a broker restart) holds no lease, so nothing else would notice it."""
        now = time.monotonic() if now is None else now
        # A paused queue's messages are meant to wait: they are no sign of a stall.
        waiting = sum(self.state.view.queue_lengths(self.consuming_lanes()).values())
        if (
            held
            or not waiting
            or (self._idle_since is not None and self.received > self._idle_since)
        ):
            self._idle_since = None if held or not waiting else now
            return False
        if self._idle_since is None:
            self._idle_since = now
            return False
        if now - self._idle_since < STALL_SECONDS:
            return False
        self._idle_since = None
        log.error(
            "consumer stalled: %d messages waiting on %s, none received for %.0f s while idle; "
            "reconnecting to the broker",
            waiting,
            ",".join(self.queues),
            STALL_SECONDS,
        )
        self._reconnect()
        return True

    def _reconnect(self) -> None:
        """Make Celery's own connection-loss path run: a fresh connection, channel, QoS and
        event-loop registration. Raised inside the event loop, where the consumer lives."""
        consumer = self.consumer
        hub = getattr(consumer, "hub", None)
        if hub is None:
            log.error("no event loop to restart the consumer in; restart this worker")
            return
        errors = [e for e in consumer.connection_errors if issubclass(e, Exception)]
        error = errors[0] if errors else ConnectionError

        def fail() -> None:
            raise error("mcp-media: consumer stalled, reconnecting")

        hub.call_soon(fail)

    def _announce(self) -> None:
        """Register this worker (queues, pool, processes, threads, how busy) in keys.WORKERS:
        `mcp-media status` and the client (who serves which queue) read it from there."""
        info = self.app.conf.mcp_media_worker
        busy = _busy()
        consuming = self.consuming()
        size = self.pool_size()
        announcement = {
            **info,
            "concurrency": size if size is not None else info.get("concurrency"),
            "paused": [q for q in self.queues if q not in consuming],
            "started_at": info.get("started_at", self._started_at),
            **busy,
            "rss_mib": rss_mib(os.getpid()),
            "seen": self.state.view.now(),  # the broker's clock, as readers compare with it
        }
        self.redis.hset(keys.WORKERS, info["name"], json.dumps(announcement))
        self._announced = {**busy, "consuming": self.consuming_lanes()}

    def forget(self) -> None:
        """Remove this worker's announcement as it stops: one bounded try. The state's client
        retries through a broker outage for about half a minute, which held a stopping
        worker that long with the broker gone; a stale announcement ages out by itself."""
        target = RedisTarget.of(self.app.conf.mcp_media_settings, self.app.conf.broker_url)
        client = target.client(
            socket_timeout=QUICK_SECONDS,
            socket_connect_timeout=QUICK_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            client.hdel(keys.WORKERS, self.app.conf.mcp_media_worker["name"])
        finally:
            client.close()

    def _sweep(self) -> None:
        """One worker at a time sweeps the journal (the lock expires by itself)."""
        lock_ms = int(HEARTBEAT_SECONDS * SWEEP_EVERY * 1000)
        if self.redis.set(keys.SWEEP_LOCK, str(os.getpid()), nx=True, px=lock_ms):
            self.recovery.sweep()

    def _run(self) -> None:
        from celery.worker import state

        beats = 0
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.is_set():
            self._wake.wait(max(0.0, min(BUSY_CHECK_SECONDS, next_beat - time.monotonic())))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._lease_received()
            except Exception:
                log.warning("could not lease received jobs", exc_info=True)
            if time.monotonic() < next_beat:
                try:
                    if {**_busy(), "consuming": self.consuming_lanes()} != self._announced:
                        self._announce()
                except Exception:
                    log.warning("could not announce this worker", exc_info=True)
                continue
            next_beat = time.monotonic() + HEARTBEAT_SECONDS
            beats += 1
            try:
                self.follow_pauses()
                self._announce()
                held = held_jobs(
                    self.redis, list(state.reserved_requests), list(state.active_requests)
                )
                renew_leases(self.redis, held)
                self.recovery.reap()
                if beats % SWEEP_EVERY == 0:
                    self._sweep()
                if self.consumer is not None:
                    self.watch(len(held))
            except Exception:  # the broker may be restarting: try again next beat
                log.warning("heartbeat failed", exc_info=True)
