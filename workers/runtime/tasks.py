"""Thin tasks: arguments in, one `execute` call, the envelope out.

Every outcome of a stage is recorded by `execute` (done, degraded or failed, with the
reason); the only retry here is for a key another delivery still holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task

from pipelines.errors import PermanentError
from pipelines.outcomes import Outcome
from pipelines.results import EnvelopeJson, ResultKey
from workers.core.capabilities import CAPABILITIES, CapabilitySpec
from workers.files.blobs import BlobRef
from workers.jobs import resources
from workers.jobs.execute import Job, Redelivered, execute, give_up
from workers.jobs.stages import Runner
from workers.runtime.recovery import drop_lease

CLAIM_RETRY_COUNTDOWN = 2.0  # the first retry of a held key; doubles up to the claim TTL


def claim_retry(retries: int, claim_ttl: float, hard_limit: float) -> tuple[float, int]:
    """(countdown, max retries) for a delivery whose key another delivery holds.

    A live holder is bounded by its hard time limit and a dead one's claim expires within the
    claim TTL, so the retries cover the longer of the two, plus a margin.
    """
    countdown = min(CLAIM_RETRY_COUNTDOWN * 2**retries, claim_ttl)
    return countdown, int(max(hard_limit, claim_ttl) // claim_ttl) + 6


def make_task(app: Celery, spec: CapabilitySpec, runner: Runner | None = None) -> None:
    @app.task(name=spec.task_name, bind=True, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator]
    def run(
        self: Task,
        key: str,
        path: str | None = None,
        trace_id: str | None = None,
        params: dict[str, Any] | None = None,
        blob: dict[str, Any] | None = None,
    ) -> EnvelopeJson:
        res = resources.for_process(app.conf.mcp_media_settings, app.conf.broker_url)
        job_id: str = self.request.id
        try:
            ref = BlobRef.from_json(blob) if blob is not None else None
        except PermanentError as exc:
            ref, path = None, None
            malformed: str | None = f"malformed message: {exc}"
        else:
            malformed = None
        job = Job(
            key=ResultKey.parse(key),
            path=Path(path) if path is not None else None,
            blob=ref,
            params=params or {},
            job_id=job_id,
            trace_id=trace_id,
            attempts=int(self.request.retries) + 1,
            worker=self.request.hostname,
            # Counted per job: a kill in any retry round counts; a delivery that found its key
            # claimed ran nothing and is not counted (execute takes it back).
            delivery=job_id,
        )
        if malformed is not None:
            return give_up(res, job, malformed, Outcome.MALFORMED_JOB).to_json()
        try:
            envelope = execute(res, job, spec, runner)
        except Redelivered as exc:
            settings = app.conf.mcp_media_settings
            hard = (self.request.timelimit or (None, None))[0] or settings.jobs.speech_max_limit
            countdown, most = claim_retry(
                int(self.request.retries), settings.jobs.claim_ttl, float(hard)
            )
            if self.request.retries >= most:
                reason = f"gave up after {most} retries: {exc}"
                return give_up(res, job, reason, Outcome.RETRIES_EXHAUSTED).to_json()
            raise self.retry(exc=exc, countdown=countdown, max_retries=most) from exc
        if res.broker is not None:
            drop_lease(res.broker, job_id)
        return envelope.to_json()


def register(app: Celery) -> None:
    for spec in CAPABILITIES.values():
        make_task(app, spec)
