"""The `ResultStore` contract, written once and run against every implementation:
the in-memory `LocalStore` (tests/unit) and the Redis store with its Lua scripts on a real
redis-server (tests/integration)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from pipelines.media import Capability
from pipelines.results import Envelope, ResultKey, Status
from workers.store import ResultStore, settled

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


def check_reserve_job_shares_one_id(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    assert store.reserve_job(KEY, "first", 60) == "first"
    assert store.reserve_job(KEY, "second", 60) == "first"
    assert store.inflight_job(KEY) == "first"
    store.forget_job(KEY, "second")  # not the holder: nothing changes
    assert store.inflight_job(KEY) == "first"
    store.put(envelope(job_id="first"))
    assert store.inflight_job(KEY) is None  # a stored result ends the in-flight entry
    assert store.reserve_job(KEY, "third", 60) == "third"
    store.forget_job(KEY, "third")
    assert store.inflight_job(KEY) is None


def check_deliveries_and_dead_letters(make: MakeStore, tmp: Path) -> None:
    store = make(tmp)
    assert [store.count_delivery("job:0", 60) for _ in range(3)] == [1, 2, 3]
    assert store.count_delivery("job:1", 60) == 1  # counted per retry round
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


def check_settled_is_the_dedup_rule() -> None:
    assert not settled(None)
    assert settled(envelope(status=Status.DONE))
    assert not settled(envelope(status=Status.DEGRADED))  # retried by the next submission
    assert not settled(envelope(status=Status.FAILED))
    assert not settled(envelope(status=Status.DONE), force=True)
    # A redelivery of a job that already finished (even degraded) does nothing more.
    assert settled(envelope(status=Status.DEGRADED, job_id="j9"), job_id="j9")
    assert settled(envelope(status=Status.DONE, job_id="j9"), job_id="j9", force=True)


CHECKS: list[Check] = [
    check_put_get_and_sidecar_truth,
    check_claims_are_exclusive_and_token_checked,
    check_one_winner_among_threads,
    check_reserve_job_shares_one_id,
    check_deliveries_and_dead_letters,
]
TIMED_CHECKS: list[TimedCheck] = [
    check_expired_claim_is_taken_over,
    check_semaphore_limits_and_expires,
]
