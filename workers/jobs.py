"""Running one job: delivery cap, dedup, claim, stage, result. Shared by tasks and --inline."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipelines.errors import PermanentError
from pipelines.results import Envelope, ResultKey, Sidecars, StageOutcome, Status
from workers.capabilities import CapabilitySpec
from workers.resources import Resources
from workers.settings import Settings
from workers.store import Claim, ResultStore, reusable

log = logging.getLogger(__name__)

CLAIM_POLL = 0.1


class Redelivered(Exception):
    """Another delivery of the same key holds the claim and its outcome is unknown yet."""


@contextmanager
def _renewing(store: ResultStore, claim: Claim, ttl: float) -> Iterator[None]:
    """Keep the claim alive while the stage runs; it expires by itself if we die."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not store.renew(claim, ttl):
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
        raise PermanentError(f"job input is not a file in the cache: {path}")
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != key.sha256:
        raise PermanentError(f"job input {path} does not match the sha256 of its key")
    return real


def run_stage(
    spec: CapabilitySpec,
    resources: Resources,
    path: Path,
    params: Mapping[str, Any],
    key: ResultKey,
) -> StageOutcome:
    """The stage with its errors mapped: permanent -> failed; transient ones propagate."""
    try:
        path = checked_input(resources.settings, key, path)
        return spec.stage(resources, path, params)
    except spec.transient:
        raise
    except PermanentError as exc:
        return StageOutcome(Status.FAILED, reason=f"{type(exc).__name__}: {exc}")


def execute(
    spec: CapabilitySpec,
    resources: Resources,
    key: ResultKey,
    path: Path,
    params: Mapping[str, Any],
    *,
    job_id: str | None,
    trace_id: str | None,
    attempts: int = 1,
    worker: str | None = None,
    claim_wait: float = 600.0,
) -> Envelope:
    """Run one job once per key across the cluster and record its envelope."""
    store = resources.store
    if store is None:
        return _execute_inline(spec, resources, key, path, params, trace_id)
    force = bool(params.get("force"))

    def usable(envelope: Envelope | None) -> bool:
        # A forced job (reprocess --all) recomputes unless its own run already finished.
        if envelope is not None and job_id is not None and envelope.job_id == job_id:
            return envelope.status.finished
        return not force and reusable(envelope)

    existing = store.get(key)
    if usable(existing):
        assert existing is not None
        return existing
    ttl = resources.settings.jobs.claim_ttl
    deadline = time.monotonic() + claim_wait
    while (claim := store.claim(key, ttl)) is None:
        found = store.get(key)
        if usable(found):
            assert found is not None
            return found
        if time.monotonic() > deadline:
            raise Redelivered(f"{key} is still claimed by another worker")
        time.sleep(CLAIM_POLL)
    try:
        found = store.get(key)
        if usable(found):
            assert found is not None
            return found
        with _renewing(store, claim, ttl):
            envelope = _timed_run(
                spec,
                resources,
                key,
                path,
                params,
                job_id=job_id,
                worker=worker,
                attempts=attempts,
                trace_id=trace_id,
            )
        store.put(envelope)
        log.info("stored %s result for %s (job %s)", envelope.status, key, job_id)
        return envelope
    finally:
        store.release(claim)


def _execute_inline(
    spec: CapabilitySpec,
    resources: Resources,
    key: ResultKey,
    path: Path,
    params: Mapping[str, Any],
    trace_id: str | None,
) -> Envelope:
    """No broker: the sidecars alone give dedup."""
    sidecars = Sidecars(resources.settings.results_root)
    existing = sidecars.read(key)
    if reusable(existing) and not params.get("force"):
        assert existing is not None
        return existing
    envelope = _timed_run(
        spec,
        resources,
        key,
        path,
        params,
        job_id=None,
        worker="inline",
        attempts=1,
        trace_id=trace_id,
    )
    sidecars.write(envelope)
    return envelope


def _timed_run(
    spec: CapabilitySpec,
    resources: Resources,
    key: ResultKey,
    path: Path,
    params: Mapping[str, Any],
    *,
    job_id: str | None,
    worker: str | None,
    attempts: int,
    trace_id: str | None,
) -> Envelope:
    """Run the stage and wrap its outcome in the envelope, with start time and duration."""
    started = time.monotonic()
    started_at = time.time()
    outcome = run_stage(spec, resources, path, params, key)
    return Envelope(
        status=outcome.status,
        key=key,
        output=outcome.output,
        job_id=job_id,
        worker=worker,
        attempts=attempts,
        elapsed_ms=round((time.monotonic() - started) * 1000),
        reason=outcome.reason,
        trace_id=trace_id,
        started_at=started_at,
    )


def failed(
    key: ResultKey, reason: str, *, job_id: str | None, trace_id: str | None, attempts: int
) -> Envelope:
    return Envelope(
        status=Status.FAILED,
        key=key,
        output={},
        job_id=job_id,
        attempts=attempts,
        reason=reason,
        trace_id=trace_id,
    )
