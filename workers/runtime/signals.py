"""Cross-cutting concerns in Celery signal hooks: trace ids in logs, timing, per-process set-up."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from typing import Any

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_after_setup,
    task_postrun,
    task_prerun,
    task_received,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

from workers.core.capabilities import lane_queues
from workers.jobs import resources

trace_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("trace_id", default="-")
LOG_FORMAT = "%(asctime)s %(levelname)s [trace=%(trace_id)s] %(processName)s %(name)s: %(message)s"
log = logging.getLogger("mcp_media.jobs")
_started: dict[str, float] = {}


class TraceFilter(logging.Filter):
    """Adds `trace_id` to every record so one grep shows the whole path of one tool result."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "trace_id"):
            record.trace_id = trace_id_var.get()
        return True


def install_log_format(logger: logging.Logger) -> None:
    # Celery logs every task's full return value at INFO; our own `end` line says enough.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
    for handler in logger.handlers:
        handler.addFilter(TraceFilter())
        handler.setFormatter(logging.Formatter(LOG_FORMAT))


def _on_logger(logger: logging.Logger, **_: Any) -> None:
    install_log_format(logger)


def _on_prerun(task_id: str, task: Any, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    trace_id_var.set((kwargs or {}).get("trace_id") or "-")
    _started[task_id] = time.monotonic()
    log.info("start %s id=%s key=%s", task.name, task_id, (kwargs or {}).get("key"))


def _on_postrun(
    task_id: str, task: Any, retval: Any = None, state: str | None = None, **_: Any
) -> None:
    elapsed = time.monotonic() - _started.pop(task_id, time.monotonic())
    status = retval.get("status") if isinstance(retval, dict) else state
    log.info("end %s id=%s status=%s elapsed=%.3fs", task.name, task_id, status, elapsed)
    trace_id_var.set("-")


def _on_process_init(app: Celery) -> None:
    """In each forked child: drop the parent's state, then load this child's engines."""

    from workers.jobs.stages import for_queue
    from workers.runtime.lifeline import die_with_parent

    # A pool child outlives nothing: if its worker is SIGKILLed, it goes too (no orphan
    # holding a job whose message the broker hands out again).
    die_with_parent(app.conf.mcp_media_worker["pid"])
    resources.reset_process()
    queues = app.conf.mcp_media_worker["queues"]
    res = resources.for_process(app.conf.mcp_media_settings, app.conf.broker_url)
    for queue in queues:
        started = time.monotonic()
        for_queue(queue).load(res)
        log.info("%s engines loaded in this process in %.2f s", queue, time.monotonic() - started)


_heartbeat: Any = None


def _start_heartbeat(app: Celery, consumer: Any = None) -> None:
    global _heartbeat
    from workers.files.shared_files import open_shared_files
    from workers.runtime.heartbeat import Heartbeat
    from workers.state.shared_state import broker_client, redis_state

    settings = app.conf.mcp_media_settings
    files = open_shared_files(settings)
    client = broker_client(settings, app.conf.broker_url)
    state = redis_state(
        client, files.sidecars, settings.jobs.result_ttl, settings.redis_transport_options
    )
    _heartbeat = Heartbeat(app, client, state, files.journal, consumer)
    _heartbeat.start()


def _on_shutdown(**_: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
        with contextlib.suppress(Exception):
            _heartbeat.forget()


def stop_heartbeat(wait: float) -> None:
    """Stop renewing leases, waiting up to `wait` s for a beat under way (a stopping worker
    hands its jobs back: no lease of them may be renewed after)."""
    if _heartbeat is not None:
        _heartbeat.stop()
        _heartbeat._thread.join(wait)


def _on_received(request: Any = None, **_: Any) -> None:
    # Lease a job the moment this worker takes it, not at the next heartbeat.
    if _heartbeat is not None and request is not None:
        _heartbeat.lease(request.id)


def _hold_paused(app: Celery) -> None:
    """Queues paused on the jobs page are not consumed from the start: a worker started
    during a pause takes none of their jobs (its heartbeat consumes them once resumed)."""
    from workers.state.shared_state import open_redis_state

    state = open_redis_state(app.conf.mcp_media_settings, app.conf.broker_url)
    try:
        paused = state.coordination.paused_queues()
    except Exception:
        log.warning("could not read the paused queues; the heartbeat follows them", exc_info=True)
        return
    finally:
        state.close()
    for queue in (getattr(app.conf, "mcp_media_worker", None) or {}).get("queues", ()):
        if queue in paused:
            log.warning("queue %s is paused: not consuming it until it is resumed", queue)
            for lane in lane_queues([queue]):  # a pause holds both lanes
                app.amqp.queues.deselect(lane)


_connected = False


def connect(app: Celery) -> None:
    """Connect the hooks once per process (signals are global in Celery)."""
    global _connected
    if _connected:
        return
    _connected = True
    # The sender is the worker's consumer: the heartbeat restarts it if it stops consuming.
    worker_ready.connect(lambda sender=None, **_: _start_heartbeat(app, sender), weak=False)
    after_setup_logger.connect(_on_logger, weak=False)
    after_setup_task_logger.connect(_on_logger, weak=False)
    task_prerun.connect(_on_prerun, weak=False)
    task_received.connect(_on_received, weak=False)
    worker_shutdown.connect(_on_shutdown, weak=False)
    task_postrun.connect(_on_postrun, weak=False)
    worker_process_init.connect(lambda **_: _on_process_init(app), weak=False)
    celeryd_after_setup.connect(lambda **_: _hold_paused(app), weak=False)
