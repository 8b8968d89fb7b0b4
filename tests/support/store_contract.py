"""The `ResultStore` contract, written once and run against every implementation:
the in-memory `LocalStore` (tests/unit) and the Redis store with its Lua scripts on a real
redis-server (tests/integration)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from pipelines.media import Capability
from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.gateway import answers
from workers.core.wait_estimate import WaitBudget, refuse_late
from workers.state.store import ResultStore

KEY = ResultKey(Capability.VISION_SUMMARIZE, "abc123", "a" * 64)
OTHER = ResultKey(Capability.AUDIO_TRANSCRIBE, "abc123", "b" * 64)

MakeStore = Callable[[Path], ResultStore]
Wait = Callable[[float], None]
Check = Callable[[MakeStore, Path], None]
TimedCheck = Callable[[MakeStore, Path, Wait], None]


def envelope(key: ResultKey = KEY, status: Status = Status.DONE, job_id: str = "j1") -> Envelope:
    return Envelope(status=status, key=key, output={"summary": "x"}, job_id=job_id)


def check_put_get_and_sidecar_truth(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    assert store.get(KEY) is None
    store.put(envelope())
    got = store.get(KEY)
    assert got is not None and got.status is Status.DONE and got.job_id == "j1"
    assert store.sidecars.read(KEY) == got
    assert store.get_many([KEY, OTHER]) == {KEY: got}
    assert store.key_for_job("j1") == KEY
    assert store.latest_key(KEY.capability.value, KEY.sha256) == KEY
    assert store.status_counts(KEY.capability.value) == {"done": 1}
    # A fresh store over the same sidecars finds the result: the files are the truth.
    again = make(tmp)
    assert again.get(KEY) == got


def check_counts_say_where_each_key_stands_after_a_retry(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    store.put(envelope(status=Status.FAILED, job_id="first"))
    store.put(envelope(OTHER, status=Status.FAILED, job_id="other"))
    assert store.status_counts(KEY.capability.value) == {"failed": 1}
    store.put(envelope(status=Status.DONE, job_id="retried"))  # the retry succeeded
    assert store.status_counts(KEY.capability.value) == {"done": 1}
    store.put(envelope(status=Status.DONE, job_id="again"))  # reprocessed: still one key
    assert store.status_counts(KEY.capability.value) == {"done": 1}
    assert store.status_counts(OTHER.capability.value) == {"failed": 1}


def check_claims_are_exclusive_and_token_checked(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    first = store.claim(KEY, ttl=30)
    assert first is not None
    assert store.claim(KEY, ttl=30) is None
    assert store.claimed(KEY)
    assert store.claim(OTHER, ttl=30) is not None  # claims are per key
    forged = type(first)(KEY, "not-the-token")
    assert not store.renew(forged, 30)
    store.release(forged)  # someone else's token releases nothing
    assert store.claimed(KEY)
    assert store.renew(first, 30)
    store.release(first)
    assert not store.claimed(KEY)
    assert not store.renew(first, 30)  # a released claim cannot be renewed
    assert store.claim(KEY, ttl=30) is not None


def check_expired_claim_is_taken_over(make: MakeStore, tmp: Path, wait: Wait) -> None:
    store = make(tmp)
    dead = store.claim(KEY, ttl=0.2)
    assert dead is not None
    wait(0.4)
    assert store.claim(KEY, ttl=30) is not None
    assert not store.renew(dead, 30)
    assert not store.reclaim(dead, 30)  # another delivery holds it now


def check_an_expired_claim_nobody_took_is_taken_back(
    make: MakeStore, tmp: Path, wait: Wait
) -> None:
    store = make(tmp)
    running = store.claim(KEY, ttl=0.2)
    assert running is not None
    wait(0.4)  # nobody could renew it (a broker outage longer than the TTL)
    assert not store.claimed(KEY)
    assert store.reclaim(running, 30)
    assert store.claimed(KEY) and store.renew(running, 30)
    assert store.claim(KEY, ttl=30) is None


def check_one_winner_among_threads(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    winners: list[object] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        got = store.claim(KEY, ttl=30)
        if got is not None:
            winners.append(got)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1


def admitted(store: ResultStore, job_id: str) -> str | None:
    """The job id admission hands a submission of KEY (no high water, not forced)."""
    return store.admit(KEY, job_id, 60, "vision", 0, force=False).job_id


def check_inflight_jobs_share_one_id(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    assert admitted(store, "first") == "first"
    assert admitted(store, "second") == "first"
    assert store.inflight_job(KEY) == "first"
    store.forget_job(KEY, "second")  # not the holder: nothing changes
    assert store.inflight_job(KEY) == "first"
    store.put(envelope(job_id="first", status=Status.FAILED))
    assert store.inflight_job(KEY) is None  # a stored result ends the in-flight entry
    assert admitted(store, "third") == "third"
    store.forget_job(KEY, "third")
    assert store.inflight_job(KEY) is None


def check_deliveries_and_dead_letters(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    assert [store.count_delivery("job:0", 60) for _ in range(3)] == [1, 2, 3]
    assert store.count_delivery("job:1", 60) == 1  # counted per name
    store.uncount_delivery("job:0")  # a delivery that ran nothing is taken back
    assert store.count_delivery("job:0", 60) == 3
    assert store.dead_letters() == []
    store.dead_letter("job", KEY, "delivered 4 times")
    store.dead_letter("job2", OTHER, "delivered 5 times")
    letters = store.dead_letters()
    assert [d["job_id"] for d in letters] == ["job2", "job"]  # newest first
    assert letters[1]["key"] == str(KEY) and letters[1]["reason"] == "delivered 4 times"
    assert len(store.dead_letters(limit=1)) == 1


def check_semaphore_limits_and_expires(make: MakeStore, tmp: Path, wait: Wait) -> None:
    store = make(tmp)
    a = store.acquire_slot("provider", 2, ttl=30)
    b = store.acquire_slot("provider", 2, ttl=0.2)
    assert a and b and a != b
    assert store.acquire_slot("provider", 2, ttl=30) is None
    store.release_slot("provider", a)
    c = store.acquire_slot("provider", 2, ttl=30)
    assert c is not None
    wait(0.4)  # b's holder died: its slot expires
    assert store.acquire_slot("provider", 2, ttl=30) is not None
    assert store.acquire_slot("other", 1, ttl=30) is not None  # semaphores are per name


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


def check_admission_decides_once(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    first = store.admit(KEY, "first", 60, "vision", 0, force=False)
    assert (first.decision, first.job_id) == ("queued", "first")
    assert store.key_for_job("first") == KEY
    joined = store.admit(KEY, "second", 60, "vision", 0, force=False)
    assert (joined.decision, joined.job_id) == ("joined", "first")
    store.put(envelope(status=Status.FAILED, job_id="first"))
    retry = store.admit(KEY, "third", 60, "vision", 0, force=False)  # a failure is retried
    assert (retry.decision, retry.job_id) == ("queued", "third")
    store.put(envelope(status=Status.DONE, job_id="third"))
    done = store.admit(KEY, "fourth", 60, "vision", 0, force=False)
    assert done.decision == "settled" and done.envelope is not None
    assert done.envelope.job_id == "third"
    forced = store.admit(KEY, "fifth", 60, "vision", 0, force=True)
    assert (forced.decision, forced.job_id) == ("queued", "fifth")


def check_admission_burst_stops_at_high_water(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    barrier = threading.Barrier(32)
    decisions: list[str] = []

    def submit(n: int) -> None:
        key = ResultKey(Capability.VISION_SUMMARIZE, "abc123", f"{n:064x}")
        barrier.wait()
        decisions.append(store.admit(key, f"job{n}", 60, "vision", 3, force=False).decision)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(decisions) == ["queued"] * 3 + ["refused"] * 29
    queued = [
        n
        for n in range(32)
        if store.inflight_job(ResultKey(Capability.VISION_SUMMARIZE, "abc123", f"{n:064x}"))
        is not None
    ]
    store.started("vision", f"job{queued[0]}")  # a worker took one: one place is free
    assert store.admit(KEY, "late", 60, "vision", 3, force=False).decision == "queued"
    assert store.admit(OTHER, "later", 60, "vision", 3, force=False).decision == "refused"
    assert store.admit(OTHER, "other-queue", 60, "stt", 3, force=False).decision == "queued"


def check_admitted_jobs_expire(make: MakeStore, tmp: Path, wait: Wait) -> None:
    store = make(tmp)
    assert store.admit(KEY, "lost", 1, "vision", 1, force=False).decision == "queued"
    assert store.admit(OTHER, "next", 1, "vision", 1, force=False).decision == "refused"
    wait(1.5)  # a message that never reached a worker stops counting when its entry expires
    assert store.admit(OTHER, "next", 1, "vision", 1, force=False).decision == "queued"


def _speech(capability: Capability, n: int) -> ResultKey:
    return ResultKey(capability, "abc123", f"{n:064x}")


def check_admission_by_expected_wait(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    budget = WaitBudget(10.0, 2)  # the caller waits 10 s; 2 slots serve the queue
    stt = Capability.AUDIO_TRANSCRIBE
    for n in range(100, 110):  # nothing measured yet: nothing is refused
        assert store.admit(_speech(stt, n), f"early{n}", 60, "stt", 0, False, budget).job_id
        store.started("stt", f"early{n}")
        store.put(replace(envelope(_speech(stt, n), job_id=f"early{n}"), elapsed_ms=4000))
    assert store.service_time("stt") == 4.0
    decisions = [
        store.admit(_speech(stt, n), f"job{n}", 60, "stt", 0, False, budget) for n in range(6)
    ]
    # ahead 0..4 (two start at once, then 6, 8, 10 s expected): queued; ahead 5: 12 s
    assert [d.decision for d in decisions] == ["queued"] * 5 + ["busy"]
    assert decisions[5].expected == 12.0 and decisions[5].job_id is None
    assert store.inflight_job(_speech(stt, 5)) is None  # a refusal registers nothing
    # the same content is never refused: joined to its job, or answered by its result
    joined = store.admit(_speech(stt, 0), "again", 60, "stt", 0, False, budget)
    assert (joined.decision, joined.job_id) == ("joined", "job0")
    settled = store.admit(_speech(stt, 100), "again", 60, "stt", 0, False, budget)
    assert settled.decision == "settled"
    store.started("stt", "job0")  # running is still ahead of new jobs
    assert store.admit(_speech(stt, 5), "job5", 60, "stt", 0, False, budget).decision == "busy"
    store.put(replace(envelope(_speech(stt, 0), job_id="job0"), elapsed_ms=4000))
    assert store.admit(_speech(stt, 5), "job5", 60, "stt", 0, False, budget).decision == "queued"
    # a job that would start at once is never refused, however long jobs take
    tts = Capability.AUDIO_SYNTHESIZE
    store.put(replace(envelope(_speech(tts, 0), job_id="slow"), elapsed_ms=100_000))
    found = [store.admit(_speech(tts, n), f"t{n}", 60, "tts", 0, False, budget) for n in (1, 2, 3)]
    assert [d.decision for d in found] == ["queued", "queued", "busy"]
    assert found[2].expected == 150.0
    # no budget (a caller that waits its turn): never refused
    assert store.admit(_speech(tts, 4), "t4", 60, "tts", 0, False).decision == "queued"


def _measured(store: ResultStore, capability: Capability, seconds: float) -> None:
    """Ten done jobs of `seconds` each: the queue's mean service time is `seconds`."""
    for n in range(100, 110):
        job = f"measured{capability.value}{n}"
        store.admit(_speech(capability, n), job, 60, "stt", 0, False)
        store.started("stt", job)
        store.put(
            replace(envelope(_speech(capability, n), job_id=job), elapsed_ms=int(seconds * 1000))
        )


def check_finish_estimate_by_position_and_late_refusal(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    stt = Capability.AUDIO_TRANSCRIBE
    _measured(store, stt, 4.0)
    for n in range(6):  # admitted in this order, no bound (the first wave of a burst)
        assert store.admit(_speech(stt, n), f"job{n}", 60, "stt", 0, False).decision == "queued"
    # by position among the jobs admitted before it, 2 slots, 4 s each: the first two start
    # at once (one mean), then one every 2 s
    estimates = [store.finish_estimate("stt", f"job{n}", 2) for n in range(6)]
    assert estimates == [4.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert store.finish_estimate("stt", "unknown", 2) is None
    # a joined submission (a dedup hit on the job in flight) changes nothing
    joined = store.admit(_speech(stt, 3), "again", 60, "stt", 0, False, WaitBudget(1.0, 2))
    assert (joined.decision, joined.job_id) == ("joined", "job3")
    assert store.finish_estimate("stt", "job3", 2) == 8.0
    store.started("stt", "job0")
    store.started("stt", "job1")
    assert store.finish_estimate("stt", "job0", 2) is None  # started: waited for to the end
    assert [store.finish_estimate("stt", f"job{n}", 2) for n in (2, 5)] == [6.0, 12.0]
    # the burst's jobs take longer than the mean measured while idle: the mean rises, and
    # so does the estimate of every job still waiting
    store.put(replace(envelope(_speech(stt, 0), job_id="job0"), elapsed_ms=14_000))
    assert store.service_time("stt") == 6.0
    assert [store.finish_estimate("stt", f"job{n}", 2) for n in (2, 3, 5)] == [6.0, 9.0, 15.0]
    # the late refusal: a waiting job refused once it cannot finish in the wait left ...
    assert refuse_late(store.finish_estimate("stt", "job5", 2), 14.0)
    assert not refuse_late(store.finish_estimate("stt", "job5", 2), 15.0)
    assert not refuse_late(store.finish_estimate("stt", "job2", 2), 10.0)
    # ... or once the wait is over (a 429 to retry, not a 504); a started job never
    assert refuse_late(store.finish_estimate("stt", "job2", 2), 0.0)
    assert not refuse_late(store.finish_estimate("stt", "job1", 2), 0.0)
    # the job refused late stays queued: a retry of its content joins it
    retry = store.admit(_speech(stt, 5), "retry", 60, "stt", 0, False, WaitBudget(1.0, 2))
    assert (retry.decision, retry.job_id) == ("joined", "job5")
    # no worker serving the queue: nothing starts, at least one mean
    assert store.finish_estimate("stt", "job2", 0) == 6.0


def check_admitted_jobs_leave_the_order_when_they_expire(
    make: MakeStore, tmp: Path, wait: Wait
) -> None:
    store = make(tmp)
    stt = Capability.AUDIO_TRANSCRIBE
    _measured(store, stt, 4.0)
    assert store.admit(_speech(stt, 0), "lost", 1, "stt", 0, False).decision == "queued"
    assert store.admit(_speech(stt, 1), "next", 60, "stt", 0, False).decision == "queued"
    assert store.finish_estimate("stt", "next", 1) == 8.0  # one ahead of it on one slot
    wait(1.5)  # a message that never reached a worker is no longer ahead of anyone
    assert store.finish_estimate("stt", "lost", 1) is None
    assert store.finish_estimate("stt", "next", 1) == 4.0


def check_dead_letters_are_counted_dropped_and_cleared(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    store.dead_letter("a", KEY, "delivered 4 times")
    store.dead_letter("b", OTHER, "delivered 4 times")
    store.dead_letter("c", KEY, "delivered 5 times")
    assert store.dead_letter_counts() == {"vision.summarize": 2, "audio.transcribe": 1}
    dropped = store.drop_dead_letter("c")
    assert dropped is not None and dropped["key"] == str(KEY)
    assert store.drop_dead_letter("c") is None  # gone: nothing more to drop
    assert [d["job_id"] for d in store.dead_letters()] == ["b", "a"]
    assert store.clear_dead_letters() == 2
    assert store.dead_letters() == [] and store.dead_letter_counts() == {}


def check_pauses_locks_reports_and_records(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    store.set_paused("stt", True)
    store.set_paused("vision", True)
    store.set_paused("vision", False)
    assert store.paused_queues() == {"stt"}
    assert store.take_lock("reprocess:image", "mine", 30)
    assert not store.take_lock("reprocess:image", "theirs", 30)
    assert store.take_lock("reprocess:audio", "theirs", 30)  # locks are per name
    assert not store.renew_lock("reprocess:image", "theirs", 30)
    store.release_lock("reprocess:image", "theirs")  # not the holder: nothing changes
    assert store.locked("reprocess:image") and store.renew_lock("reprocess:image", "mine", 30)
    store.release_lock("reprocess:image", "mine")
    assert not store.locked("reprocess:image")
    assert store.report("reprocess-progress:image") is None
    store.put_report("reprocess-progress:image", {"done": 3, "running": True}, 60)
    assert store.report("reprocess-progress:image") == {"done": 3, "running": True}
    assert store.job_record("j1") is None
    store.record_job("j1", {"task": "t", "kwargs": {"path": "/x"}}, 60)
    assert store.job_record("j1") == {"task": "t", "kwargs": {"path": "/x"}}


def check_locks_expire_with_their_holder(make: MakeStore, tmp: Path, wait: Wait) -> None:
    store = make(tmp)
    assert store.take_lock("reprocess:image", "dead", 0.2)
    wait(0.4)
    assert not store.locked("reprocess:image")
    assert store.take_lock("reprocess:image", "next", 30)
    assert not store.renew_lock("reprocess:image", "dead", 30)


def check_chunk_streams_hand_output_over_in_order(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    name = keys.chunks(KEY)
    assert store.read_chunks(name, "0", block_ms=10) == []  # nothing yet: an empty answer
    store.append_chunk(name, b"first")
    store.append_chunk(name, b"second")
    found = store.read_chunks(name, "0", block_ms=10)
    assert [c.data for c in found] == [b"first", b"second"] and not any(c.end for c in found)
    store.end_chunks(name, "ValueError: boom")
    (end,) = store.read_chunks(name, found[-1].id, block_ms=10)  # only what came after
    assert end.end and end.error == "ValueError: boom"
    # a reader waiting on the stream is woken by the next chunk
    other = keys.chunks(OTHER)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend(store.read_chunks(other, "0", 10_000)))
    reader.start()
    store.append_chunk(other, b"late")
    reader.join(timeout=15)
    assert [c.data for c in got] == [b"late"]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not a chunk stream"):
        store.append_chunk("mcp-media:result:x", b"no")


CHECKS: list[Check] = [
    check_put_get_and_sidecar_truth,
    check_counts_say_where_each_key_stands_after_a_retry,
    check_claims_are_exclusive_and_token_checked,
    check_one_winner_among_threads,
    check_inflight_jobs_share_one_id,
    check_deliveries_and_dead_letters,
    check_admission_decides_once,
    check_admission_burst_stops_at_high_water,
    check_admission_by_expected_wait,
    check_finish_estimate_by_position_and_late_refusal,
    check_dead_letters_are_counted_dropped_and_cleared,
    check_pauses_locks_reports_and_records,
    check_chunk_streams_hand_output_over_in_order,
]
TIMED_CHECKS: list[TimedCheck] = [
    check_expired_claim_is_taken_over,
    check_an_expired_claim_nobody_took_is_taken_back,
    check_semaphore_limits_and_expires,
    check_admitted_jobs_expire,
    check_admitted_jobs_leave_the_order_when_they_expire,
    check_locks_expire_with_their_holder,
]
