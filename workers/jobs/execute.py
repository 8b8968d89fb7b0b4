"""Running one job: dedup, version check, delivery cap, claim, stage, result. The one path
for Celery tasks and for `--inline` runs (which use the in-memory shared state)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.errors import (
    PermanentError,
    Skipped,
    Stopped,
    TransientError,
    causes,
    disk_full,
    outcome_of,
)
from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultKey, StageOutcome, Status
from workers.broker.replies import broker_outcome
from workers.core.capabilities import CAPABILITIES, CapabilitySpec
from workers.core.gateway import answers
from workers.core.settings import Settings
from workers.files.blobs import BlobRef
from workers.jobs.resources import Resources
from workers.jobs.stages import RUNNERS, Runner
from workers.state.cancellation import CANCELLED, Cancelled, cancel_requested, running_job
from workers.state.claims import Claim, Claims
from workers.state.results import Results

log = logging.getLogger(__name__)

DELIVERY_TTL = 86400


class Redelivered(TransientError):
    """Another delivery of the same key holds the claim and its outcome is unknown yet."""


class MalformedJob(PermanentError):
    """The message names no input this worker may read."""

    outcome = Outcome.MALFORMED_JOB


def _time_limits() -> tuple[type[BaseException], ...]:
    """What a Celery task's soft time limit raises inside its stage (none without Celery)."""
    try:
        from billiard.exceptions import SoftTimeLimitExceeded
    except ImportError:  # jobs run in the door's own process only
        return ()
    return (SoftTimeLimitExceeded,)


TIME_LIMITS = _time_limits()


@dataclass(frozen=True, slots=True)
class Job:
    key: ResultKey
    path: Path | None  # a message from before blob references named its cached path
    params: Mapping[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    trace_id: str | None = None
    attempts: int = 1
    worker: str | None = None
    delivery: str | None = None  # counted against the redelivery cap; None: not counted
    blob: BlobRef | None = None  # the input, by content: found here or fetched

    @property
    def force(self) -> bool:
        return bool(self.params.get("force"))


@contextmanager
def _renewing(claims: Claims, claim: Claim, ttl: float) -> Iterator[None]:
    """Keep the claim alive while the stage runs; it expires by itself if we die."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 3):
            try:
                if claims.renew(claim, ttl):
                    continue
                # Expired while nobody could renew it (a broker outage longer than the
                # TTL): take it back, or a redelivered copy would run the job a second time.
                if claims.reclaim(claim, ttl):
                    log.warning("claim on %s expired while running; taken back", claim.key)
                    continue
                log.warning("claim on %s was lost while running", claim.key)
                return
            except Exception:  # the broker may be restarting; try again next tick
                log.warning("claim renewal failed for %s", claim.key, exc_info=True)

    thread = threading.Thread(target=renew, name="claim-renewer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def checked_input(settings: Settings, key: ResultKey, path: Path) -> Path:
    """The path a message names, only if it is the cached blob its key names.

    Whoever can publish on the queue chooses the path: without this a job could make a
    worker read any file it can read (and send it to the vision provider).
    """
    real = path.resolve()
    if not real.is_relative_to(settings.cache_root.resolve()) or not real.is_file():
        raise MalformedJob(f"job input is not a file in the cache: {path}")
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != key.sha256:
        raise MalformedJob(f"job input {path} does not match the sha256 of its key")
    return real


def job_input(resources: Resources, job: Job, spec: CapabilitySpec) -> Path:
    """The local file of the job's input: from this node's cache or the blob store."""
    ref = job.blob
    if ref is None:
        if job.path is None:
            raise MalformedJob("the job names no input")
        return checked_input(resources.settings, job.key, job.path)
    if ref.sha256 != job.key.sha256 or ref.kind is not spec.input_kind:
        raise MalformedJob(
            f"job input {ref.kind} {ref.sha256[:16]}... is not the {spec.input_kind} its key names"
        )
    return resources.node.local(ref)


def run_stage(resources: Resources, job: Job, runner: Runner) -> StageOutcome:
    """The stage, with every failure turned into an outcome: nothing escapes into the agent.

    `Skipped` (a capability turned off) is `degraded`, so a later submission runs again once
    it is turned on; anything else that goes wrong is `failed` with its type and message,
    and the code the error names (`pipelines.errors.outcome_of`).
    """
    try:
        path = job_input(resources, job, CAPABILITIES[job.key.capability])
        return runner.stage(resources, path, job.params)
    except Skipped as exc:
        return StageOutcome(Status.DEGRADED, reason=f"skipped: {exc}", outcome=exc.outcome)
    except Cancelled as exc:
        return StageOutcome(Status.FAILED, reason=str(exc), outcome=exc.outcome)
    except Stopped as exc:  # a pipeline saw the job's stop_asked(): the client cancelled it
        return StageOutcome(Status.FAILED, reason=f"{CANCELLED} ({exc})", outcome=exc.outcome)
    except Exception as exc:
        full = disk_full(exc)
        if full is not None:  # not retried: the next attempt would meet the same full disk
            reason = disk_full_reason(full)
            return StageOutcome(Status.FAILED, reason=reason, outcome=Outcome.DISK_FULL)
        if not isinstance(exc, PermanentError):
            log.exception("stage %s failed on %s", job.key.capability, job.key)
        code = Outcome.TIMEOUT if isinstance(exc, TIME_LIMITS) else outcome_of(exc)
        reason = f"{type(exc).__name__}: {exc}"[:500]
        return StageOutcome(Status.FAILED, reason=reason, outcome=code)


def _code(outcome: StageOutcome) -> Outcome | None:
    """The code a result carries: none when done, `internal` when a stage named none."""
    if outcome.status is Status.DONE:
        return None
    return outcome.outcome or Outcome.INTERNAL


def disk_full_reason(error: OSError) -> str:
    """`disk_full: ...`, for people: the OS's words and the folder when the error names a
    file (the code, `disk_full`, is what the doors answer by)."""
    where = f" under {Path(str(error.filename)).parent}" if error.filename else ""
    return f"disk_full: no space left on the cache volume{where} ({error})"[:500]


def failed(job: Job, reason: str, outcome: Outcome) -> Envelope:
    return Envelope(
        status=Status.FAILED,
        key=job.key,
        output={},
        job_id=job.job_id,
        worker=job.worker,
        attempts=job.attempts,
        reason=reason,
        trace_id=job.trace_id,
        outcome=outcome,
    )


def execute(
    resources: Resources,
    job: Job,
    spec: CapabilitySpec | None = None,
    runner: Runner | None = None,
) -> Envelope:
    """Run one job once per key across the cluster and record its envelope.

    `spec` and `runner` default to the declared ones of the key's capability. A key whose
    claim another delivery holds raises `Redelivered` at once: the task retries it later
    with a countdown instead of holding a worker slot while it waits.
    """
    spec = spec or CAPABILITIES[job.key.capability]
    runner = runner or RUNNERS[job.key.capability]
    state = resources.state
    if job.job_id is not None:
        state.admission.started(spec.queue, job.job_id)
    existing = state.results.get(job.key)
    if answers(existing, job.job_id, job.force):
        assert existing is not None
        return existing  # finished before, or a stale redelivery of finished work
    own_version = resources.version(spec, job.params)
    if job.key.version != own_version:
        return _record(
            state.results,
            failed(
                job,
                f"processor version mismatch: submitted {job.key.version}, this worker runs "
                f"{own_version} (workers of one queue with different models or settings?); "
                "submitting it again keys it by what the live workers announce",
                Outcome.VERSION_MISMATCH,
            ),
        )
    if job.delivery is not None and job.job_id is not None:
        cap = resources.settings.jobs.max_deliveries
        count = state.records.count_delivery(job.delivery, ttl=DELIVERY_TTL)
        if count > cap:
            reason = f"dead-lettered: delivered {count} times (cap {cap}); the job kills its worker"
            state.dead_letters.add(job.job_id, job.key, reason)
            return _record(state.results, failed(job, reason, Outcome.DEAD_LETTERED))
    ttl = resources.settings.jobs.claim_ttl
    claim = state.claims.claim(job.key, ttl)
    if claim is None:
        if job.delivery is not None and job.job_id is not None:
            state.records.uncount_delivery(job.delivery)  # it ran nothing: not against the cap
        raise Redelivered(f"{job.key} is claimed by another worker")
    try:
        # Whoever held the claim before us may have finished the work meanwhile.
        found = state.results.get(job.key)
        if answers(found, job.job_id, job.force):
            assert found is not None
            return found
        if cancel_requested(state.coordination, job.job_id):  # asked to stop while it waited
            return _record(state.results, failed(job, CANCELLED, Outcome.CANCELLED))
        started, started_at = time.monotonic(), time.time()
        running = running_job.set(job.job_id)
        try:
            with _renewing(state.claims, claim, ttl):
                outcome = run_stage(resources, job, runner)
        finally:
            running_job.reset(running)
        envelope = Envelope(
            status=outcome.status,
            key=job.key,
            output=outcome.output,
            job_id=job.job_id,
            worker=job.worker,
            attempts=job.attempts,
            elapsed_ms=round((time.monotonic() - started) * 1000),
            reason=outcome.reason,
            trace_id=job.trace_id,
            started_at=started_at,
            outcome=_code(outcome),
        )
        # A broker refusing writes (MISCONF: its disk is full) may take them again within
        # seconds; the result is kept and stored then, while our claim still stands.
        return _record(state.results, envelope, patience=ttl / 2)
    finally:
        state.claims.release(claim)


def give_up(resources: Resources, job: Job, reason: str, outcome: Outcome) -> Envelope:
    """Record that a job ends without running (its retries ran out, or its message names
    nothing usable): never silently absent."""
    return _record(resources.state.results, failed(job, reason, outcome))


def _record(results: Results, envelope: Envelope, patience: float = 0.0) -> Envelope:
    deadline, delay = time.monotonic() + patience, 0.1
    while True:
        try:
            return _put(results, envelope)
        except Exception as exc:
            if not _writes_refused(exc) or time.monotonic() + delay > deadline:
                raise
            log.warning(
                "the broker refuses writes; storing %s again in %.1f s", envelope.key, delay
            )
        time.sleep(delay)
        delay = min(1.0, delay * 2)


def _writes_refused(exc: BaseException) -> bool:
    return any(broker_outcome(found) is Outcome.BROKER_CANNOT_PERSIST for found in causes(exc))


def _put(results: Results, envelope: Envelope) -> Envelope:
    try:
        results.put(envelope)
    except Exception as exc:
        # The sidecar found no room. Raising would leave the job without an outcome: its
        # lease expires, it is re-sent, meets the same full disk, and so on for as long as
        # the disk stays full. It ends `failed` now, indexed and announced without a sidecar;
        # a later submission runs it again. Other errors (a broker restarting) still raise.
        full = disk_full(exc)
        if full is None:
            raise
        envelope = dataclasses.replace(
            envelope,
            status=Status.FAILED,
            output={},
            reason=disk_full_reason(full),
            outcome=Outcome.DISK_FULL,
        )
        results.put(envelope, sidecar=False)
    if envelope.status is Status.DONE:
        log.info("stored %s result for %s (job %s)", envelope.status, envelope.key, envelope.job_id)
    else:
        log.warning(
            "stored %s result for %s (job %s): %s",
            envelope.status,
            envelope.key,
            envelope.job_id,
            envelope.reason,
        )
    return envelope
