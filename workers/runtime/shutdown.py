"""Scale-down: a worker told to stop (SIGTERM) ends within a grace period and loses nothing.

An orchestrator sends SIGTERM, waits its own grace (Kubernetes: terminationGracePeriodSeconds,
30 s by default), then SIGKILLs. On SIGTERM Celery starts its warm shutdown: it stops
consuming at once and waits for the running jobs, acking each as it finishes; messages it
holds but never started go back to their queues when its connection closes. That wait has no
bound. Here a watchdog, started by the same signal, ends it `jobs.shutdown_grace` seconds
later: what still runs then is handed back and the process exits at once.

Handing back, in order: the heartbeat stops (so nothing renews a lease), the pool children
running a job are killed (prefork; a thread cannot be stopped, the exit ends it), the leases
are dropped (no reaper re-sends a job that is back in its queue), the claims and provider
slots this worker's processes took (their tokens say so: `claims.taken_here`) are released
and the handed-back jobs' deliveries uncounted (a scale-down is not the job's fault: it must
not count towards the dead-letter cap); last, every message this worker holds unacked is
restored to the head of its queue (kombu's own restore, the one it runs when a channel
closes). Another worker takes each job at once: no visibility timeout, no lease, claim or
slot left to expire.

Why not Celery's soft shutdown (`worker_soft_shutdown_timeout`, 5.5+): it belongs to the cold
shutdown (SIGQUIT; SIGTERM only through the REMAP_SIGTERM environment variable, read when
billiard is first imported); it sleeps the whole timeout inside the signal handler whenever
a job runs, so a job ending a second later is acked only at the end, and a worker whose jobs
all finish early still waits the full timeout; and it then cancels running jobs with
`pool.terminate_job`, which the threads pool (our vision workers) does not implement, after
which the pool's executor waits for the running threads without a bound.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutting_down

from pipelines.results import ResultKey
from workers.core import keys
from workers.jobs.stages import VISION_SLOT
from workers.state.claims import taken_here
from workers.state.job_records import RedisJobRecords
from workers.state.redis_values import RELEASE
from workers.state.shared_state import broker_client

log = logging.getLogger("mcp_media.shutdown")

# The hand-back itself: a few Redis round trips. Waited for before the exit, never longer.
HEARTBEAT_JOIN_SECONDS = 1.0


class Grace:
    """The watchdog of one worker process: armed by its first SIGTERM (or SIGINT/SIGQUIT)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.consumer: Any = None
        self._armed = threading.Event()

    @property
    def seconds(self) -> float:
        return float(self.app.conf.mcp_media_settings.jobs.shutdown_grace)

    def on_ready(self, sender: Any = None, **_: Any) -> None:
        self.consumer = sender

    def on_shutting_down(self, sig: str = "", how: str = "", **_: Any) -> None:
        # Runs inside Celery's signal handler: start a thread and return.
        if self._armed.is_set():
            return
        self._armed.set()
        grace = self.seconds
        log.warning("%s: stopping; running jobs have %.1f s to finish", sig or how, grace)
        threading.Thread(
            target=self._after, args=(grace,), name="mcp-media-grace", daemon=True
        ).start()

    def _after(self, grace: float) -> None:
        time.sleep(grace)  # the process is gone before this returns if the jobs end in time
        try:
            handed = self.hand_back()
        except Exception:
            log.exception("handing back the running jobs failed; their leases bring them back")
            handed = []
        log.warning("grace of %.1f s over: handed back %d job(s) %s", grace, len(handed), handed)
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)  # a requested stop; the pool children die with us (parent-death signal)

    def hand_back(self) -> list[str]:
        """Give back every job this worker holds; the ids of those that were running."""
        from celery.worker import state

        from workers.runtime import signals

        signals.stop_heartbeat(HEARTBEAT_JOIN_SECONDS)
        active = _snapshot(state.active_requests)
        held = [r.id for r in [*active, *_snapshot(state.reserved_requests)]]
        for request in active:
            pid = getattr(request, "worker_pid", None)
            if pid and pid != os.getpid():  # a prefork child; a thread ends with the process
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        settings = self.app.conf.mcp_media_settings
        client = broker_client(settings, self.app.conf.broker_url, bounded=True)
        try:
            if held:
                client.zrem(keys.LEASES, *held)
            _release_slots(client)
            released = [r.id for r in active if _release_claim(client, r)]
            # The messages last, the exit right after: a worker that takes one finds its key
            # free (a claim still held would have it retry seconds later). A vision thread
            # of ours ending in these few milliseconds may still store its result; the other
            # delivery then finds it, unless it looked just before: the one window for a
            # second run, a thread's last milliseconds (a prefork child is already dead).
            self._restore_unacked()
            return released
        finally:
            client.close()

    def _restore_unacked(self) -> None:
        """Each message this channel holds unacked back at the head of its queue, by kombu's
        restore (one transaction per message on its unacked hash: an ack or reject racing
        it from the event loop neither doubles nor drops it). Its own `restore_unacked`
        iterates the delivered map that such an ack changes: a copy of the tags here."""
        task_consumer = getattr(self.consumer, "task_consumer", None)
        qos = getattr(getattr(task_consumer, "channel", None), "qos", None)
        if qos is not None:
            for tag in _snapshot(qos._delivered):
                qos.restore_by_tag(tag)


def _snapshot(items: Any) -> list[Any]:
    """A copy of a collection the event loop may change meanwhile."""
    for _ in range(100):
        with contextlib.suppress(RuntimeError):  # changed size during iteration: again
            return list(items)
    return []


def _release_claim(client: Any, request: Any) -> bool:
    """Release the claim on a running job's key if this worker's processes took it, and
    uncount that delivery (a scale-down is not the job's fault)."""
    try:
        key = keys.claim(ResultKey.parse(str((request.kwargs or {})["key"])))
    except (KeyError, ValueError, TypeError):
        return False
    token = client.get(key)
    if token is None or not taken_here(token):
        return False
    client.register_script(RELEASE)(keys=[key], args=[token])
    RedisJobRecords(client).uncount_delivery(request.id)
    return True


def _release_slots(client: Any) -> None:
    """The provider slots this worker's jobs held: free for others now, not after their TTL."""
    name = keys.semaphore(VISION_SLOT)
    ours = [m for m in client.zrange(name, 0, -1) if taken_here(m)]
    if ours:
        client.zrem(name, *ours)


def register(app: Celery) -> None:
    grace = Grace(app)
    worker_ready.connect(grace.on_ready, weak=False)
    worker_shutting_down.connect(grace.on_shutting_down, weak=False)
