"""The Celery app of a worker process: the shared configuration, the tasks and the hooks.

`celery -A workers.runtime.worker_app worker` and `mcp-media worker` both use `get_app()`; the
broker is MCP_MEDIA_REDIS_URL or the embedded redis-server of MCP_MEDIA_HOME.
"""

from __future__ import annotations

import functools
from typing import Any

from celery import Celery

from workers.broker.celery_config import base_app
from workers.broker.embedded import broker_url
from workers.core.confinement import confine_process
from workers.core.settings import Settings
from workers.runtime import pool_commands, shutdown, signals, tasks


def create_app(settings: Settings, url: str) -> Celery:
    app = base_app(settings, url)
    app.conf.worker_consumer = "workers.runtime.consumer:Consumer"  # its quicker reconnect
    tasks.register(app)
    signals.connect(app)
    shutdown.register(app)
    pool_commands.register()
    return app


@functools.cache
def get_app() -> Celery:
    settings = Settings()
    confine_process(settings.home)
    return create_app(settings, broker_url(settings.home, settings.redis_url).url)


def __getattr__(name: str) -> Any:
    # `celery -A workers.runtime.worker_app` looks up `app`; build it on first use, not at import.
    if name in ("app", "celery"):
        return get_app()
    raise AttributeError(name)
