"""Remote control commands of our own, beside Celery's (the jobs page sends them).

Celery's threads pool has no grow/shrink command, so `mcp_media_threads` does it: the
executor may start more threads, and the channel's prefetch (late acks: unacked = running +
reserved) caps how many jobs run at once, which is what makes a shrink real even though idle
threads stay.

Celery's `pool_shrink` raises "Can't shrink pool. All processes busy!" while every prefork
process runs a job, and the shrink is lost. `mcp_media_processes` keeps it instead: the
prefetch drops at once (so the first process to free takes no new job) and the shrink is
retried every SHRINK_RETRY seconds in the worker's event loop until a process is idle.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery.worker.control import control_command

from workers.broker.remote_control import BUSY, PROCESSES_COMMAND, THREADS_COMMAND

log = logging.getLogger(__name__)

SHRINK_RETRY = 0.5  # seconds between tries of a shrink that waits for a free process


def register() -> None:
    """Add our commands to Celery's control panel (global, once per worker process)."""
    control_command(name=THREADS_COMMAND, args=[("n", int)], signature="[N=1]")(resize_threads)
    control_command(name=PROCESSES_COMMAND, args=[("n", int)], signature="[N=1]")(resize_processes)


def resize_threads(state: Any, n: int = 1, **_: Any) -> dict[str, Any]:
    """Grow (n > 0) or shrink (n < 0) a threads pool by n threads."""
    consumer = state.consumer
    pool = consumer.pool
    executor = getattr(pool, "executor", None)
    if executor is None:
        return {"error": f"not a threads pool ({type(pool).__name__}): use {PROCESSES_COMMAND}"}
    size = int(pool.limit) + int(n)
    if size < 1:
        return {"error": f"a threads pool keeps at least one thread (it has {pool.limit})"}
    pool.limit = size
    executor._max_workers = size
    consumer._update_prefetch_count(int(n))
    return {"ok": f"threads pool now {size}"}


@dataclass
class _Waiting:
    """Shrinks asked while every process was busy: one worker per process, so one of these."""

    shrinks: int = 0
    retry: Any = None  # the timer entry that tries them


_waiting = _Waiting()


def resize_processes(state: Any, n: int = 1, **_: Any) -> dict[str, Any]:
    """Grow or shrink a prefork pool by one process; a shrink while every process is busy
    waits for the first to free (answered with `pending`)."""
    if n not in (1, -1):
        return {"error": f"a prefork pool changes by one process at a time, not {n}"}
    consumer = state.consumer
    pool = consumer.pool
    if not hasattr(pool, "shrink") or getattr(pool, "executor", None) is not None:
        return {"error": f"not a prefork pool ({type(pool).__name__}): use {THREADS_COMMAND}"}
    if getattr(consumer.controller, "autoscaler", None):
        return {"error": "this worker autoscales: change its --autoscale range instead"}
    if n > 0:
        if _waiting.shrinks:  # a grow cancels a shrink that still waits
            _waiting.shrinks -= 1
            consumer._update_qos_eventually(1)
            return {"ok": "a waiting shrink is cancelled", "pending": _waiting.shrinks}
        pool.grow(1)
        consumer._update_prefetch_count(1)
        return {"ok": f"prefork pool now {pool.num_processes}"}
    size = int(pool.num_processes) - _waiting.shrinks
    if size <= 1:
        more = f" ({_waiting.shrinks} shrink(s) already wait)" if _waiting.shrinks else ""
        return {"error": f"a prefork pool keeps at least one process{more}"}
    if _waiting.shrinks == 0 and _shrink_one(consumer):
        consumer._update_qos_eventually(-1)
        return {"ok": f"prefork pool now {pool.num_processes}"}
    _waiting.shrinks += 1
    consumer._update_qos_eventually(-1)  # the process that frees first takes no new job
    if _waiting.retry is None:
        _waiting.retry = consumer.timer.call_repeatedly(SHRINK_RETRY, _retry, (consumer,))
    log.warning("pool shrink waits: %s (%d waiting)", BUSY, _waiting.shrinks)
    return {"ok": BUSY, "pending": _waiting.shrinks}


def _shrink_one(consumer: Any) -> bool:
    """Stop one idle process; False while every process runs a job."""
    pool = consumer.pool
    try:
        pool.shrink(1)
    except ValueError:  # billiard: "Can't shrink pool. All processes busy!"
        return False
    if consumer.initial_prefetch_count:  # what a reconnect sets the prefetch back to
        consumer.initial_prefetch_count = pool.num_processes * consumer.prefetch_multiplier
    return True


def _retry(consumer: Any) -> None:
    while _waiting.shrinks and _shrink_one(consumer):
        _waiting.shrinks -= 1
        log.warning("pool shrunk to %d processes, as asked", consumer.pool.num_processes)
    if not _waiting.shrinks and _waiting.retry is not None:
        _waiting.retry.cancel()
        _waiting.retry = None
