"""Remote control commands of our own, beside Celery's (the jobs page sends them).

Celery's `pool_grow`/`pool_shrink` resize a prefork pool; its threads pool has no such
command, so `mcp_media_threads` does it: the executor may start more threads, and the
channel's prefetch (late acks: unacked = running + reserved) caps how many jobs run at once,
which is what makes a shrink real even though idle threads stay.
"""

from __future__ import annotations

from typing import Any

from celery.worker.control import control_command

from workers.control import THREADS_COMMAND  # the name the jobs page sends


def register() -> None:
    """Add our commands to Celery's control panel (global, once per worker process)."""
    control_command(name=THREADS_COMMAND, args=[("n", int)], signature="[N=1]")(resize_threads)


def resize_threads(state: Any, n: int = 1, **_: Any) -> dict[str, Any]:
    """Grow (n > 0) or shrink (n < 0) a threads pool by n threads."""
    consumer = state.consumer
    pool = consumer.pool
    executor = getattr(pool, "executor", None)
    if executor is None:
        return {"error": f"not a threads pool ({type(pool).__name__}): use pool_grow/shrink"}
    size = int(pool.limit) + int(n)
    if size < 1:
        return {"error": f"a threads pool keeps at least one thread (it has {pool.limit})"}
    pool.limit = size
    executor._max_workers = size
    consumer._update_prefetch_count(int(n))
    return {"ok": f"threads pool now {size}"}
