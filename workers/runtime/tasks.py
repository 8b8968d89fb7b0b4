"""Thin tasks: arguments in, one `execute` call, the envelope out.

Every outcome of a stage is recorded by `execute` (done, degraded or failed, with the
reason); the only retry here is for a key another delivery still holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task

from pipelines.results import EnvelopeJson, ResultKey
from workers.capabilities import CAPABILITIES, CapabilitySpec
from workers.jobs import resources
from workers.jobs.execute import Job, Redelivered, execute
from workers.jobs.stages import Runner
from workers.runtime.recovery import drop_lease
from workers.store import RedisStore

CLAIM_RETRY_COUNTDOWN = 5
CLAIM_RETRIES = 10


def make_task(app: Celery, spec: CapabilitySpec, runner: Runner | None = None) -> None:
    @app.task(name=spec.task_name, bind=True, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator]
    def run(
        self: Task,
        key: str,
        path: str,
        trace_id: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> EnvelopeJson:
        res = resources.for_process(app.conf.mcp_media_settings, app.conf.broker_url)
        job_id: str = self.request.id
        job = Job(
            key=ResultKey.parse(key),
            path=Path(path),
            params=params or {},
            job_id=job_id,
            trace_id=trace_id,
            attempts=int(self.request.retries) + 1,
            worker=self.request.hostname,
            # Counted per retry round so that claim retries do not eat the redelivery budget.
            delivery=f"{job_id}:{self.request.retries}",
        )
        try:
            envelope = execute(res, job, spec, runner)
        except Redelivered as exc:
            raise self.retry(
                exc=exc, countdown=CLAIM_RETRY_COUNTDOWN, max_retries=CLAIM_RETRIES
            ) from exc
        if isinstance(res.store, RedisStore):
            drop_lease(res.store.redis, job_id)
        return envelope.to_json()


def register(app: Celery) -> None:
    for spec in CAPABILITIES.values():
        make_task(app, spec)
