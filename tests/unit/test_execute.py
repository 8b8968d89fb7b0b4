"""The one job path (`workers.jobs.execute`) on the in-memory shared state: dedup, version check,
delivery cap and dead letters, claims, and every stage failure turned into a result."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from billiard.exceptions import SoftTimeLimitExceeded

from pipelines.errors import PermanentError, Skipped, Stopped
from pipelines.media import BlobError, Capability, MarkerReason, MediaKind
from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultKey, StageOutcome, Status
from tests.support.factories import png_bytes
from workers.core.capabilities import CAPABILITIES
from workers.core.settings import Settings
from workers.jobs.execute import Job, Redelivered, execute
from workers.jobs.resources import Resources
from workers.jobs.stages import RUNNERS, Runner
from workers.runtime.tasks import claim_retry
from workers.state.shared_state import memory_state

pytestmark = pytest.mark.unit

CAP = Capability.VISION_SUMMARIZE


class CountingStage:
    """A stage that records its calls; `outcome` or `error` says how it ends."""

    def __init__(self, outcome: StageOutcome | None = None, error: Exception | None = None):
        self.calls: list[Path] = []
        self.outcome = outcome or StageOutcome(Status.DONE, {"summary": "a cat"})
        self.error = error

    def __call__(self, res: Resources, path: Path, params: Mapping[str, Any]) -> StageOutcome:
        self.calls.append(path)
        if self.error is not None:
            raise self.error
        return self.outcome


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path / "home")})


@pytest.fixture
def resources(settings: Settings) -> Resources:
    return Resources(settings, memory_state(settings.sidecars()))


def cached_job(settings: Settings, **extra: Any) -> Job:
    stored = settings.media_cache().store_bytes(png_bytes(), MediaKind.IMAGE, mime="image/png")
    version = CAPABILITIES[CAP].version(settings)
    return Job(ResultKey(CAP, version, stored.sha256), stored.path, **extra)


def runner(stage: CountingStage) -> Runner:
    return replace(RUNNERS[CAP], stage=stage)


def full_disk() -> BlobError:
    """A cache error raised while a full disk refused a write (ENOSPC in its chain)."""
    try:
        raise OSError(errno.ENOSPC, "No space left on device", "/home/x/cache/audio/.tmp-1")
    except OSError as exc:
        wrapped = BlobError(MarkerReason.CACHE_ERROR, "cache error while writing")
        wrapped.__cause__ = exc
        return wrapped


def test_done_result_is_stored_once_and_reused(resources: Resources, settings: Settings) -> None:
    stage = CountingStage()
    job = cached_job(settings, job_id="j1", trace_id="t1", worker="w")
    first = execute(resources, job, runner=runner(stage))
    assert first.status is Status.DONE and first.output == {"summary": "a cat"}
    assert (first.job_id, first.trace_id, first.worker) == ("j1", "t1", "w")
    assert settings.sidecars().read(job.key) == first
    again = execute(resources, replace(job, job_id="j2"), runner=runner(stage))
    assert again == first
    assert len(stage.calls) == 1


def test_degraded_result_is_retried_by_the_next_submission(
    resources: Resources, settings: Settings
) -> None:
    stage = CountingStage(StageOutcome(Status.DEGRADED, reason="timeout"))
    job = cached_job(settings, job_id="j1")
    assert execute(resources, job, runner=runner(stage)).status is Status.DEGRADED
    # The same delivery again (a stale redelivery) does nothing more...
    execute(resources, job, runner=runner(stage))
    assert len(stage.calls) == 1
    # ...but a new submission runs the stage again.
    stage.outcome = StageOutcome(Status.DONE, {"summary": "ok now"})
    assert execute(resources, replace(job, job_id="j2"), runner=runner(stage)).status is Status.DONE
    assert len(stage.calls) == 2


def test_force_runs_again(resources: Resources, settings: Settings) -> None:
    stage = CountingStage()
    job = cached_job(settings, job_id="j1")
    execute(resources, job, runner=runner(stage))
    forced = replace(job, job_id="j2", params={"force": True})
    assert execute(resources, forced, runner=runner(stage)).job_id == "j2"
    assert len(stage.calls) == 2


@pytest.mark.parametrize(
    ("error", "status", "reason", "code"),
    [
        (
            Skipped("vision provider is 'none'"),
            Status.DEGRADED,
            "skipped: vision provider",
            Outcome.SKIPPED,
        ),
        (
            PermanentError("bad input"),
            Status.FAILED,
            "PermanentError: bad input",
            Outcome.INVALID_INPUT,
        ),
        (RuntimeError("engine bug"), Status.FAILED, "RuntimeError: engine bug", Outcome.INTERNAL),
        (
            BlobError(MarkerReason.CACHE_ERROR, "cache error while writing"),
            Status.FAILED,
            "BlobError: cache error",
            Outcome.INTERNAL,
        ),
        (full_disk(), Status.FAILED, "disk_full: no space left", Outcome.DISK_FULL),
        (SoftTimeLimitExceeded(), Status.FAILED, "SoftTimeLimitExceeded", Outcome.TIMEOUT),
        (Stopped("asked"), Status.FAILED, "cancelled", Outcome.CANCELLED),
    ],
)
def test_stage_errors_become_results_with_their_code(
    resources: Resources,
    settings: Settings,
    error: Exception,
    status: Status,
    reason: str,
    code: Outcome,
) -> None:
    job = cached_job(settings, job_id="j1")
    envelope = execute(resources, job, runner=runner(CountingStage(error=error)))
    assert envelope.status is status
    assert envelope.reason is not None and envelope.reason.startswith(reason)
    assert envelope.outcome is code
    assert settings.sidecars().read(job.key) == envelope


def test_a_stage_that_names_no_code_for_its_failure_is_internal_and_done_has_none(
    resources: Resources, settings: Settings
) -> None:
    job = cached_job(settings, job_id="j1")
    stage = CountingStage(StageOutcome(Status.DEGRADED, reason="why"))
    assert execute(resources, job, runner=runner(stage)).outcome is Outcome.INTERNAL
    done = execute(resources, replace(job, job_id="j2"), runner=runner(CountingStage()))
    assert done.status is Status.DONE and done.outcome is None
    assert done.to_json()["meta"]["outcome"] is None


def test_input_outside_the_cache_is_refused(
    resources: Resources, settings: Settings, tmp_path: Path
) -> None:
    job = cached_job(settings, job_id="j1")
    outside = tmp_path / "secret.png"
    outside.write_bytes(png_bytes())  # same bytes, same sha256, wrong place
    stage = CountingStage()
    envelope = execute(resources, replace(job, path=outside), runner=runner(stage))
    assert envelope.status is Status.FAILED and "not a file in the cache" in (envelope.reason or "")
    assert envelope.outcome is Outcome.MALFORMED_JOB
    assert stage.calls == []


def test_version_mismatch_fails_without_running(resources: Resources, settings: Settings) -> None:
    job = cached_job(settings, job_id="j1")
    stale = replace(job, key=replace(job.key, version="0dd0dd0dd0dd"))
    stage = CountingStage()
    envelope = execute(resources, stale, runner=runner(stage))
    assert envelope.status is Status.FAILED and "version mismatch" in (envelope.reason or "")
    assert envelope.outcome is Outcome.VERSION_MISMATCH
    assert stage.calls == []


def test_delivery_cap_dead_letters(resources: Resources, settings: Settings) -> None:
    cap = settings.jobs.max_deliveries
    job = cached_job(settings, job_id="poison", delivery="poison:0")
    for _ in range(cap):  # each delivery dies before it can store anything
        assert resources.state.records.count_delivery("poison:0", 60) <= cap
    stage = CountingStage()
    envelope = execute(resources, job, runner=runner(stage))
    assert envelope.status is Status.FAILED and "dead-lettered" in (envelope.reason or "")
    assert envelope.outcome is Outcome.DEAD_LETTERED
    assert stage.calls == []
    (letter,) = resources.state.dead_letters.newest()
    assert letter["job_id"] == "poison" and letter["key"] == str(job.key)
    assert letter["outcome"] == "dead_lettered"


def test_a_held_claim_is_redelivered_at_once_and_the_retry_takes_the_holders_result(
    resources: Resources, settings: Settings
) -> None:
    job = cached_job(settings, job_id="j2")
    state = resources.state
    held = state.claims.claim(job.key, ttl=30)
    assert held is not None
    stage = CountingStage()
    with pytest.raises(Redelivered):
        execute(resources, job, runner=runner(stage))
    state.results.put(Envelope(Status.DONE, job.key, {"summary": "by the other"}, job_id="j1"))
    state.claims.release(held)
    again = execute(resources, job, runner=runner(stage))
    assert again.job_id == "j1"
    assert stage.calls == []


def test_a_delivery_that_finds_its_key_claimed_is_not_counted_against_the_cap(
    resources: Resources, settings: Settings
) -> None:
    """A poison job's kills count in every retry round; claim retries, which ran nothing,
    never do (so they neither eat the budget nor hide the kills)."""
    job = cached_job(settings, job_id="j3", delivery="j3")
    state = resources.state
    held = state.claims.claim(job.key, ttl=30)
    assert held is not None
    for _ in range(5):
        with pytest.raises(Redelivered):
            execute(resources, job, runner=runner(CountingStage()))
    assert state.records.count_delivery("j3", 60) == 1  # none of the five was counted


def test_claim_retries_back_off_to_the_claim_ttl_and_outlast_the_holder() -> None:
    countdowns = [claim_retry(n, claim_ttl=30.0, hard_limit=600.0)[0] for n in range(8)]
    assert countdowns == sorted(countdowns) and countdowns[0] < 30.0 and countdowns[-1] == 30.0
    _, most = claim_retry(0, claim_ttl=30.0, hard_limit=600.0)
    waited = sum(claim_retry(n, 30.0, 600.0)[0] for n in range(most))
    assert waited > 600.0 + 30.0
