"""Thin tasks: arguments in, one `execute` call, an envelope out; errors mapped to retry/fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from pipelines.results import EnvelopeJson, ResultKey
from workers import resources
from workers.capabilities import CAPABILITIES, CapabilitySpec
from workers.jobs import Redelivered, execute, failed
from workers.recovery import drop_lease
from workers.settings import Settings
from workers.store import reusable


def _process_resources(app: Celery) -> resources.Resources:
    settings: Settings = app.conf.mcp_media_settings
    return resources.for_process(settings, app.conf.broker_url)


def make_task(app: Celery, spec: CapabilitySpec, settings: Settings) -> None:
    cap = settings.jobs.max_deliveries

    @app.task(name=spec.task_name, bind=True, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator]
    def run(
        self: Task,
        key: str,
        path: str,
        trace_id: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> EnvelopeJson:
        res = _process_resources(app)
        store = res.store
        assert store is not None
        result_key = ResultKey.parse(key)
        job_id: str = self.request.id
        attempts = int(self.request.retries) + 1
        existing = store.get(result_key)
        own = existing is not None and existing.job_id == job_id
        if own or (reusable(existing) and not (params or {}).get("force")):
            assert existing is not None
            drop_lease(store.redis, job_id)
            return existing.to_json()  # a stale redelivery of finished work: nothing to do
        own_version = res.version(spec)
        if result_key.version != own_version:
            reason = (
                f"processor version mismatch: submitted {result_key.version}, this worker runs "
                f"{own_version}; give clients and workers the same settings"
            )
            envelope = failed(
                result_key, reason, job_id=job_id, trace_id=trace_id, attempts=attempts
            )
            store.put(envelope)
            return envelope.to_json()
        # Counted per retry round so retries do not eat the redelivery budget.
        delivery = store.count_delivery(f"{job_id}:{self.request.retries}", ttl=86400)
        if delivery > cap:
            reason = (
                f"dead-lettered: delivered {delivery} times (cap {cap}); the job kills its worker"
            )
            store.dead_letter(job_id, result_key, reason)
            envelope = failed(
                result_key, reason, job_id=job_id, trace_id=trace_id, attempts=attempts
            )
            store.put(envelope)
            return envelope.to_json()
        try:
            envelope = execute(
                spec,
                res,
                result_key,
                Path(path),
                params or {},
                job_id=job_id,
                trace_id=trace_id,
                attempts=attempts,
                worker=self.request.hostname,
            )
            drop_lease(store.redis, job_id)
            return envelope.to_json()
        except Redelivered as exc:
            raise self.retry(exc=exc, countdown=5, max_retries=spec.max_retries + 10) from exc
        except SoftTimeLimitExceeded:
            envelope = failed(
                result_key,
                "time limit exceeded",
                job_id=job_id,
                trace_id=trace_id,
                attempts=attempts,
            )
            store.put(envelope)
            return envelope.to_json()
        except spec.transient as exc:
            if self.request.retries >= spec.max_retries:
                envelope = failed(
                    result_key,
                    f"gave up after {attempts} attempts: {exc}",
                    job_id=job_id,
                    trace_id=trace_id,
                    attempts=attempts,
                )
                store.put(envelope)
                return envelope.to_json()
            raise self.retry(exc=exc, countdown=2**self.request.retries) from exc


def register(app: Celery, settings: Settings) -> None:
    for spec in CAPABILITIES.values():
        make_task(app, spec, settings)
