"""The admission port: one atomic decision per submission, by queue depth and expected wait
(`workers.core.wait_estimate`), and the estimate a waiting caller reads."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from pipelines.media import Capability
from pipelines.results import ResultKey, Status
from tests.support.state_contract.common import (
    KEY,
    OTHER,
    Check,
    Harness,
    envelope,
    speech_key,
)
from workers.core.gateway import answers
from workers.core.wait_estimate import refuse_late
from workers.state.admission import Admitted, QueueAdmission, Submission, WaitBudget
from workers.state.shared_state import SharedState

STT = Capability.AUDIO_TRANSCRIBE


def admitted(admission: QueueAdmission, job_id: str) -> str | None:
    """The job id admission hands a submission of KEY (no high water, not forced)."""
    return admission.admit(Submission(KEY, job_id, 60, "vision")).job_id


def check_inflight_jobs_share_one_id(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admission = state.admission
    assert admitted(admission, "first") == "first"
    assert admitted(admission, "second") == "first"
    assert admission.inflight_job(KEY) == "first"
    admission.forget_job(KEY, "second")  # not the holder: nothing changes
    assert admission.inflight_job(KEY) == "first"
    state.results.put(envelope(job_id="first", status=Status.FAILED))
    assert admission.inflight_job(KEY) is None  # a stored result ends the in-flight entry
    assert admitted(admission, "third") == "third"
    admission.forget_job(KEY, "third")
    assert admission.inflight_job(KEY) is None


def check_answers_is_the_dedup_rule() -> None:
    assert not answers(None, None)
    assert answers(envelope(status=Status.DONE), None)
    assert not answers(envelope(status=Status.DEGRADED), None)  # retried by the next submission
    assert not answers(envelope(status=Status.FAILED), None)
    assert not answers(envelope(status=Status.DONE), None, force=True)
    # An older failure never answers a new job: the new job is its retry.
    assert not answers(envelope(status=Status.FAILED, job_id="old"), "new")
    assert answers(envelope(status=Status.DONE, job_id="old"), "new")
    # A job's own run answers it (a redelivery of finished work does nothing more).
    assert answers(envelope(status=Status.DEGRADED, job_id="j9"), "j9")
    assert answers(envelope(status=Status.DONE, job_id="j9"), "j9", force=True)
    assert not answers(envelope(status=Status.PENDING, job_id="j9"), "j9")


def check_admission_decides_once(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admit, put = state.admission.admit, state.results.put
    first = admit(Submission(KEY, "first", 60, "vision"))
    assert (first.decision, first.job_id) == ("queued", "first")
    assert state.results.key_for_job("first") == KEY
    joined = admit(Submission(KEY, "second", 60, "vision"))
    assert (joined.decision, joined.job_id) == ("joined", "first")
    put(envelope(status=Status.FAILED, job_id="first"))
    retry = admit(Submission(KEY, "third", 60, "vision"))  # a failure is retried
    assert (retry.decision, retry.job_id) == ("queued", "third")
    put(envelope(status=Status.DONE, job_id="third"))
    done = admit(Submission(KEY, "fourth", 60, "vision"))
    assert done.decision == "settled" and done.envelope is not None
    assert done.envelope.job_id == "third"
    forced = admit(Submission(KEY, "fifth", 60, "vision", force=True))
    assert (forced.decision, forced.job_id) == ("queued", "fifth")


def check_admission_burst_stops_at_high_water(h: Harness, tmp: Path) -> None:
    admission = h.make(tmp).admission
    barrier = threading.Barrier(32)
    decisions: list[str] = []

    def key(n: int) -> ResultKey:
        return ResultKey(Capability.VISION_SUMMARIZE, "abc123", f"{n:064x}")

    def submit(n: int) -> None:
        barrier.wait()
        decisions.append(admission.admit(Submission(key(n), f"job{n}", 60, "vision", 3)).decision)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(decisions) == ["queued"] * 3 + ["refused"] * 29
    queued = [n for n in range(32) if admission.inflight_job(key(n)) is not None]
    admission.started("vision", f"job{queued[0]}")  # a worker took one: one place is free
    assert admission.admit(Submission(KEY, "late", 60, "vision", 3)).decision == "queued"
    refused = admission.admit(Submission(OTHER, "later", 60, "vision", 3))
    assert (refused.decision, refused.waiting) == ("refused", 3)
    assert admission.admit(Submission(OTHER, "other-queue", 60, "stt", 3)).decision == "queued"


def check_admitted_jobs_expire(h: Harness, tmp: Path) -> None:
    admission = h.make(tmp).admission
    assert admission.admit(Submission(KEY, "lost", 1, "vision", 1)).decision == "queued"
    assert admission.admit(Submission(OTHER, "next", 1, "vision", 1)).decision == "refused"
    h.wait(1.5)  # a message that never reached a worker stops counting when its entry expires
    assert admission.admit(Submission(OTHER, "next", 1, "vision", 1)).decision == "queued"


def check_admission_by_expected_wait(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admission, put = state.admission, state.results.put
    budget = WaitBudget(10.0, 2)  # the caller waits 10 s; 2 slots serve the queue

    def submit(n: int, job: str, capability: Capability = STT, queue: str = "stt") -> str:
        found = admission.admit(
            Submission(speech_key(capability, n), job, 60, queue, 0, False, budget)
        )
        return found.decision

    for n in range(100, 110):  # nothing measured yet: nothing is refused
        assert submit(n, f"early{n}") == "queued"
        admission.started("stt", f"early{n}")
        put(replace(envelope(speech_key(STT, n), job_id=f"early{n}"), elapsed_ms=4000))
    assert admission.service_time("stt") == 4.0
    decisions = [
        admission.admit(Submission(speech_key(STT, n), f"job{n}", 60, "stt", budget=budget))
        for n in range(6)
    ]
    # ahead 0..4 (two start at once, then 6, 8, 10 s expected): queued; ahead 5: 12 s
    assert [d.decision for d in decisions] == ["queued"] * 5 + ["busy"]
    assert decisions[5].expected == 12.0 and decisions[5].job_id is None
    assert admission.inflight_job(speech_key(STT, 5)) is None  # a refusal registers nothing
    # the same content is never refused: joined to its job, or answered by its result
    joined = admission.admit(Submission(speech_key(STT, 0), "again", 60, "stt", budget=budget))
    assert (joined.decision, joined.job_id) == ("joined", "job0")
    assert submit(100, "again") == "settled"
    admission.started("stt", "job0")  # running is still ahead of new jobs
    assert submit(5, "job5") == "busy"
    put(replace(envelope(speech_key(STT, 0), job_id="job0"), elapsed_ms=4000))
    assert submit(5, "job5") == "queued"
    # a job that would start at once is never refused, however long jobs take
    tts = Capability.AUDIO_SYNTHESIZE
    put(replace(envelope(speech_key(tts, 0), job_id="slow"), elapsed_ms=100_000))
    found = [
        admission.admit(Submission(speech_key(tts, n), f"t{n}", 60, "tts", budget=budget))
        for n in (1, 2, 3)
    ]
    assert [d.decision for d in found] == ["queued", "queued", "busy"]
    assert found[2].expected == 150.0
    # no budget (a caller that waits its turn): never refused
    assert admission.admit(Submission(speech_key(tts, 4), "t4", 60, "tts")).decision == "queued"


def _measured(state: SharedState, capability: Capability, seconds: float) -> None:
    """Ten done jobs of `seconds` each: the queue's mean service time is `seconds`."""
    for n in range(100, 110):
        job = f"measured{capability.value}{n}"
        state.admission.admit(Submission(speech_key(capability, n), job, 60, "stt"))
        state.admission.started("stt", job)
        state.results.put(
            replace(envelope(speech_key(capability, n), job_id=job), elapsed_ms=int(seconds * 1000))
        )


def check_finish_estimate_by_position_and_late_refusal(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admission = state.admission
    estimate = admission.finish_estimate
    _measured(state, STT, 4.0)
    for n in range(6):  # admitted in this order, no bound (the first wave of a burst)
        assert (
            admission.admit(Submission(speech_key(STT, n), f"job{n}", 60, "stt")).decision
            == "queued"
        )
    # by position among the jobs admitted before it, 2 slots, 4 s each: the first two start
    # at once (one mean), then one every 2 s
    assert [estimate("stt", f"job{n}", 2) for n in range(6)] == [4.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert estimate("stt", "unknown", 2) is None
    # a joined submission (a dedup hit on the job in flight) changes nothing
    short = WaitBudget(1.0, 2)
    joined = admission.admit(Submission(speech_key(STT, 3), "again", 60, "stt", budget=short))
    assert (joined.decision, joined.job_id) == ("joined", "job3")
    assert estimate("stt", "job3", 2) == 8.0
    admission.started("stt", "job0")
    admission.started("stt", "job1")
    assert estimate("stt", "job0", 2) is None  # started: waited for to the end
    assert [estimate("stt", f"job{n}", 2) for n in (2, 5)] == [6.0, 12.0]
    # the burst's jobs take longer than the mean measured while idle: the mean rises, and
    # so does the estimate of every job still waiting
    state.results.put(replace(envelope(speech_key(STT, 0), job_id="job0"), elapsed_ms=14_000))
    assert admission.service_time("stt") == 6.0
    assert [estimate("stt", f"job{n}", 2) for n in (2, 3, 5)] == [6.0, 9.0, 15.0]
    # the late refusal: a waiting job refused once it cannot finish in the wait left ...
    assert refuse_late(estimate("stt", "job5", 2), 14.0)
    assert not refuse_late(estimate("stt", "job5", 2), 15.0)
    assert not refuse_late(estimate("stt", "job2", 2), 10.0)
    # ... or once the wait is over (a 429 to retry, not a 504); a started job never
    assert refuse_late(estimate("stt", "job2", 2), 0.0)
    assert not refuse_late(estimate("stt", "job1", 2), 0.0)
    # the job refused late stays queued: a retry of its content joins it
    retry = admission.admit(Submission(speech_key(STT, 5), "retry", 60, "stt", budget=short))
    assert (retry.decision, retry.job_id) == ("joined", "job5")
    # no worker serving the queue: nothing starts, at least one mean
    assert estimate("stt", "job2", 0) == 6.0


def check_admitted_jobs_leave_the_order_when_they_expire(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admission = state.admission
    _measured(state, STT, 4.0)
    assert admission.admit(Submission(speech_key(STT, 0), "lost", 1, "stt")).decision == "queued"
    assert admission.admit(Submission(speech_key(STT, 1), "next", 60, "stt")).decision == "queued"
    assert admission.finish_estimate("stt", "next", 1) == 8.0  # one ahead of it on one slot
    h.wait(1.5)  # a message that never reached a worker is no longer ahead of anyone
    assert admission.finish_estimate("stt", "lost", 1) is None
    assert admission.finish_estimate("stt", "next", 1) == 4.0


def check_a_failed_job_moves_no_mean_but_leaves_the_running_set(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    admission = state.admission
    _measured(state, STT, 4.0)
    admission.admit(Submission(speech_key(STT, 0), "broken", 60, "stt"))
    admission.started("stt", "broken")
    admission.admit(Submission(speech_key(STT, 1), "next", 60, "stt"))
    assert admission.finish_estimate("stt", "next", 1) == 8.0  # behind the running one
    failed = replace(envelope(speech_key(STT, 0), Status.FAILED, "broken"), elapsed_ms=60_000)
    state.results.put(failed)
    assert admission.service_time("stt") == 4.0  # only done jobs are measured
    assert admission.finish_estimate("stt", "next", 1) == 4.0  # nothing runs ahead of it now


def check_lanes_are_admitted_apart(h: Harness, tmp: Path) -> None:
    """Each lane queue counts its own waiting jobs: a batch backlog never refuses a live
    submission, by high water or by expected wait; the running jobs and the mean are the
    capability's, shared by its lanes."""
    state = h.make(tmp)
    admission = state.admission
    _measured(state, STT, 4.0)

    def submit(
        n: int, job: str, queue: str, high: int = 0, budget: WaitBudget | None = None
    ) -> Admitted:
        return admission.admit(Submission(speech_key(STT, n), job, 60, queue, high, False, budget))

    for n in range(10):
        assert submit(200 + n, f"b{n}", "stt.batch").decision == "queued"
    refused = submit(210, "b10", "stt.batch", 10)
    assert (refused.decision, refused.waiting) == ("refused", 10)  # the batch lane's high water
    assert submit(0, "live0", "stt", 10).decision == "queued"  # the live lane's own
    budget = WaitBudget(10.0, 2)  # 4 s a job on 2 slots: 5 ahead would finish in 12 s
    decisions = [submit(n, f"live{n}", "stt", budget=budget).decision for n in range(1, 6)]
    assert decisions == ["queued"] * 4 + ["busy"]  # counted behind the live jobs only
    assert admission.finish_estimate("stt", "live0", 2) == 4.0
    assert admission.finish_estimate("stt", "b0", 2) is None  # not in the live lane
    assert admission.finish_estimate("stt.batch", "b9", 2) == 20.0  # nine ahead in its lane
    assert admission.service_time("stt.batch") == admission.service_time("stt") == 4.0
    admission.started("stt", "b0")  # a worker names the capability's queue: either lane
    assert submit(210, "b10", "stt.batch", 10).decision == "queued"
    assert admission.finish_estimate("stt.batch", "b10", 2) is not None
    admission.started("stt", "b1")  # running batch work is ahead of live work: the slots
    admission.started("stt", "b2")  # are shared
    assert admission.finish_estimate("stt", "live0", 2) == 6.0


CHECKS: list[Check] = [
    check_inflight_jobs_share_one_id,
    check_admission_decides_once,
    check_admission_burst_stops_at_high_water,
    check_admitted_jobs_expire,
    check_admission_by_expected_wait,
    check_finish_estimate_by_position_and_late_refusal,
    check_admitted_jobs_leave_the_order_when_they_expire,
    check_a_failed_job_moves_no_mean_but_leaves_the_running_set,
    check_lanes_are_admitted_apart,
]
