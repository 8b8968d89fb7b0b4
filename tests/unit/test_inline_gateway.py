"""The in-process job gateway keeps the gateway's contract without a broker: one admission per
key (answered, joined, refused, queued) and waits matched to the job they were handed."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, StageOutcome, Status
from tests.support.factories import png_bytes, wav_bytes
from workers.core.gateway import Admission, QueueFull
from workers.core.settings import Settings
from workers.gateways.inline import InlineGateway
from workers.jobs.execute import Job, execute
from workers.jobs.resources import Resources
from workers.jobs.stages import RUNNERS

pytestmark = pytest.mark.unit

CAP = Capability.VISION_SUMMARIZE


class GatedStage:
    """A stage that counts its calls and ends only when the test opens its gate."""

    def __init__(self, status: Status = Status.DONE) -> None:
        self.calls = 0
        self.gate = threading.Event()
        self.status = status

    def __call__(self, res: Resources, path: Path, params: Mapping[str, Any]) -> StageOutcome:
        self.calls += 1
        assert self.gate.wait(30), "the test never opened the gate"
        return StageOutcome(self.status, {"summary": f"run {self.calls}"}, reason="why")


def gateway(tmp_path: Path, stage: GatedStage, **env: str) -> InlineGateway:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path / "home"), **env})
    runner = replace(RUNNERS[CAP], stage=stage)

    def run(resources: Resources, job: Job) -> Envelope:
        return execute(resources, job, runner=runner)

    return InlineGateway(settings, run=run)


def image(gw: InlineGateway, seed: int = 0) -> tuple[str, Path]:
    stored = gw.settings.media_cache().store_bytes(
        png_bytes(colour=(seed, 30, 30)), MediaKind.IMAGE, mime="image/png"
    )
    return stored.sha256, stored.path


def test_the_same_key_joins_the_job_in_flight_and_one_run_answers_both(tmp_path: Path) -> None:
    stage = GatedStage()
    gw = gateway(tmp_path, stage)
    sha, path = image(gw)
    first = gw.submit_one(CAP, sha, path)
    second = gw.submit_one(CAP, sha, path)
    assert first.admission is Admission.QUEUED and first.envelope is None
    assert second.admission is Admission.JOINED and second.id == first.id
    assert gw.wait([first], 0.05)[0].envelope is None  # still running: handed back as it was
    stage.gate.set()
    done = gw.wait([first, second], 30)
    assert [h.status for h in done] == [Status.DONE, Status.DONE]
    assert {h.envelope.job_id for h in done if h.envelope} == {first.id}
    third = gw.submit_one(CAP, sha, path)
    assert third.admission is Admission.SETTLED and third.envelope == done[0].envelope
    assert stage.calls == 1
    gw.close(finish_jobs=True)


def test_an_old_failure_never_answers_the_new_job(tmp_path: Path) -> None:
    stage = GatedStage()
    gw = gateway(tmp_path, stage)
    sha, path = image(gw)
    key = gw.key(CAP, sha)
    gw.resources.state.results.put(Envelope(Status.FAILED, key, {}, job_id="old", reason="boom"))
    handle = gw.submit_one(CAP, sha, path)
    assert handle.admission is Admission.QUEUED and handle.id != "old"
    assert gw.wait([handle], 0.05)[0].envelope is None  # not the stored failure
    stage.gate.set()
    (done,) = gw.wait([handle], 30)
    assert done.envelope is not None and done.envelope.job_id == handle.id
    assert done.status is Status.DONE
    gw.close(finish_jobs=True)


def test_admission_with_a_limit_refuses_over_the_high_water(tmp_path: Path) -> None:
    stage = GatedStage()
    gw = gateway(tmp_path, stage, MCP_MEDIA_JOBS__HIGH_WATER="2")
    handles = [gw.submit_one(CAP, *image(gw, seed), limit=True) for seed in range(2)]
    with pytest.raises(QueueFull, match="high water 2"):
        gw.submit_one(CAP, *image(gw, 9), limit=True)
    assert gw.waiting()["vision"] == 2
    # the high water is per queue: another queue still takes jobs
    audio = gw.settings.media_cache().store_bytes(wav_bytes(), MediaKind.AUDIO)
    other = gw.submit_one(Capability.AUDIO_TRANSCRIBE, audio.sha256, audio.path, limit=True)
    assert other.admission is Admission.QUEUED
    unlimited = gw.submit_one(CAP, *image(gw, 9))  # a caller that waits its turn itself
    stage.gate.set()
    finished = gw.wait([*handles, unlimited], 30)
    assert all(h.status is Status.DONE for h in finished)
    assert gw.waiting()["vision"] == 0
    gw.close(finish_jobs=True)


def test_a_job_is_found_by_its_id_and_by_its_sha256(tmp_path: Path) -> None:
    stage = GatedStage(Status.DEGRADED)
    gw = gateway(tmp_path, stage)
    sha, path = image(gw)
    handle = gw.submit_one(CAP, sha, path)
    assert gw.result(handle.id) == (handle.id, handle.key, None)
    assert gw.result(sha) == (handle.id, handle.key, None)  # running: no envelope yet
    stage.gate.set()
    (done,) = gw.wait([handle], 30)
    assert done.status is Status.DEGRADED
    assert gw.result(sha) == (handle.id, handle.key, done.envelope)
    assert gw.result("no-such-job") == (None, None, None)
    gw.close(finish_jobs=True)
