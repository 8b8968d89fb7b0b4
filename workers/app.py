"""The Celery app, built from Settings: JSON only, one queue per capability, reliable acks.

`celery -A workers.app worker` and `mcp-media worker` both use `get_app()`; the broker is
MCP_MEDIA_REDIS_URL or the embedded redis-server of MCP_MEDIA_HOME.
"""

from __future__ import annotations

import functools
from typing import Any

from celery import Celery
from kombu.entity import Queue

from workers import signals, tasks
from workers.broker import broker_url
from workers.capabilities import CAPABILITIES, QUEUES
from workers.settings import Settings


def create_app(settings: Settings, url: str) -> Celery:
    longest_hard = max(
        spec.time_limits(settings, settings.max_blob_bytes)[1] for spec in CAPABILITIES.values()
    )
    # Unacked messages come back after this; it must outlast the longest job.
    visibility = int(longest_hard + 300)
    app = Celery("mcp_media", broker=url, backend=url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        event_serializer="json",
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        # A replacement pool child loads its models before it reports in: give it time.
        worker_proc_alive_timeout=120,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_transport_options={"visibility_timeout": visibility},
        result_backend_transport_options={"visibility_timeout": visibility},
        result_expires=settings.jobs.result_ttl,
        result_extended=True,
        task_track_started=True,
        task_queues=[Queue(name) for name in QUEUES],  # type: ignore[no-untyped-call]
        task_default_queue=QUEUES[0],
        task_routes={spec.task_name: {"queue": spec.queue} for spec in CAPABILITIES.values()},
        worker_send_task_events=True,
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        broker_heartbeat=0,
    )
    app.conf.mcp_media_settings = settings
    tasks.register(app, settings)
    signals.connect(app)
    return app


@functools.cache
def get_app() -> Celery:
    settings = Settings()
    return create_app(settings, broker_url(settings.home, settings.redis_url).url)


def __getattr__(name: str) -> Any:
    # `celery -A workers.app` looks up `app`; build it on first use, not at import.
    if name in ("app", "celery"):
        return get_app()
    raise AttributeError(name)
