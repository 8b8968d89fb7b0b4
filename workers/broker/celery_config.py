"""The Celery configuration every process shares, senders and workers alike.

JSON only, two queues per capability (its live and batch lanes, consumed live first:
`workers.broker.lanes`), late acks, prefetch 1, no result backend: the sidecar file is the
one copy of a result. The client builds its app here and only sends tasks by
name; `workers.runtime.worker_app` adds the tasks and signal hooks for worker processes.
"""

from __future__ import annotations

from celery import Celery
from kombu.entity import Queue

from workers.broker.target import RedisTarget
from workers.core.capabilities import CAPABILITIES, QUEUES, lane_queues
from workers.core.settings import Settings


def longest_hard_limit(settings: Settings) -> float:
    return max(
        spec.time_limits(settings, settings.max_blob_bytes)[1] for spec in CAPABILITIES.values()
    )


def base_app(settings: Settings, url: str | None = None) -> Celery:
    """The app on `url` (default MCP_MEDIA_REDIS_URL), reached as the settings say."""
    target = RedisTarget.of(settings, url)
    # Unacked messages come back after this; it must outlast the longest job.
    visibility = int(longest_hard_limit(settings) + 300)
    # The batch lanes' floor share (`workers.broker.lanes`, the transport's queue order).
    options = {"visibility_timeout": visibility, "batch_every": settings.jobs.batch_every}
    broker = target.celery_conf(options)
    app = Celery("mcp_media", broker=broker["broker_url"], set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        # A replacement pool child loads its models before it reports in: give it time.
        worker_proc_alive_timeout=120,
        # A running job outlives a broker restart or failover: it finishes, its result is
        # written (the store's client retries), and a later copy of its message finds the
        # result. Cancelling would throw the work away and run it again from the start.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_transport=broker["broker_transport"],
        broker_use_ssl=broker["broker_use_ssl"],
        broker_transport_options=broker["broker_transport_options"],
        task_queues=[Queue(name) for name in lane_queues()],  # type: ignore[no-untyped-call]
        task_default_queue=QUEUES[0],
        task_routes={spec.task_name: {"queue": spec.queue} for spec in CAPABILITIES.values()},
        worker_send_task_events=True,
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        broker_heartbeat=0,
    )
    app.conf.mcp_media_settings = settings
    return app


def bound_sending(app: Celery, connect_timeout: float, timeout: float) -> None:
    """A door's sends fail within about these seconds when the broker is gone, instead of
    retrying: its caller is waiting (transport options the settings give still win)."""
    options = dict(app.conf.broker_transport_options or {})
    options.setdefault("socket_connect_timeout", connect_timeout)
    options.setdefault("socket_timeout", timeout)
    app.conf.update(
        broker_connection_timeout=connect_timeout,
        broker_transport_options=options,
        task_publish_retry_policy={
            "max_retries": 1,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.2,
        },
    )
