"""The read-only cluster view: what the jobs page and `/metrics` read, as the other ports and
the roster (announcements, queue lengths) hold it."""

from __future__ import annotations

from pathlib import Path

from pipelines.results import Status
from tests.support.state_contract.common import KEY, OTHER, Check, Harness, envelope
from workers.core.cluster_view import WORKER_FRESH_SECONDS, QueueSignals


def check_live_workers_are_the_freshly_announced(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    view = state.view
    assert view.live_workers() == [] and view.serving("stt") == []
    now = view.now()
    entry = {"queues": ["stt", "tts"], "pool": "prefork", "concurrency": 2}
    h.announce(state, "fresh@x", {**entry, "seen": now - 1})
    h.announce(state, "gone@x", {**entry, "seen": now - WORKER_FRESH_SECONDS - 45})
    h.announce(state, "vision@y", {"queues": ["vision"], "seen": now})
    assert [w.name for w in view.live_workers()] == ["fresh@x", "vision@y"]
    (fresh,) = view.serving("stt")
    assert (fresh.name, fresh.pool, fresh.concurrency) == ("fresh@x", "prefork", 2)
    assert 0.5 < fresh.age_s < 30
    assert [w.name for w in view.serving("vision")] == ["vision@y"]
    assert [w.name for w in view.live_workers(max_age=120)] == ["fresh@x", "gone@x", "vision@y"]


def check_queue_lengths_count_the_jobs_waiting(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    assert state.view.queue_lengths(["stt", "vision"]) == {"stt": 0, "vision": 0}
    h.enqueue(state, "stt", 2)
    h.enqueue(state, "vision", 1)
    assert state.view.queue_lengths(["stt", "vision", "tts"]) == {"stt": 2, "vision": 1, "tts": 0}


def check_queue_signals_count_the_jobs_waiting_and_nothing_held(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    h.enqueue(state, "stt", 2)
    signals = state.view.queue_signals(["stt", "tts"])
    assert (signals["stt"].waiting, signals["stt"].reserved, signals["stt"].running) == (2, 0, 0)
    assert signals["tts"] == QueueSignals(0, 0, 0, 0.0, 0.0)


def check_the_view_reads_what_the_other_ports_hold(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    view = state.view
    state.results.put(envelope(KEY, Status.FAILED, "first"))
    state.results.put(envelope(OTHER, Status.DONE, "other"))
    state.results.put(envelope(KEY, Status.DONE, "retried"))
    recent = view.recent_results()
    assert [(e.key, e.job_id) for e in recent] == [(KEY, "retried"), (OTHER, "other")]
    assert [e.key for e in view.recent_results(limit=1)] == [KEY]
    assert view.status_counts(KEY.capability.value) == {"done": 1}
    state.dead_letters.add("dead", KEY, "delivered 4 times")
    assert view.dead_letter_count() == 1
    assert view.dead_letter_counts() == {KEY.capability.value: 1}
    assert [d["job_id"] for d in view.dead_letters()] == ["dead"]
    state.coordination.set_paused("tts", True)
    assert view.paused_queues() == {"tts"}
    assert not view.locked("reprocess:audio") and view.report("reprocess-progress:audio") is None
    state.coordination.take_lock("reprocess:audio", "mine", 30)
    state.coordination.put_report("reprocess-progress:audio", {"done": 1}, 60)
    assert view.locked("reprocess:audio")
    assert view.report("reprocess-progress:audio") == {"done": 1}


CHECKS: list[Check] = [
    check_live_workers_are_the_freshly_announced,
    check_queue_lengths_count_the_jobs_waiting,
    check_queue_signals_count_the_jobs_waiting_and_nothing_held,
    check_the_view_reads_what_the_other_ports_hold,
]
