"""The dead letters port: newest first, counted by capability, dropped one by one or
cleared."""

from __future__ import annotations

from pathlib import Path

from tests.support.state_contract.common import KEY, OTHER, Check, Harness


def check_dead_letters_are_listed_newest_first(h: Harness, tmp: Path) -> None:
    dead_letters = h.make(tmp).dead_letters
    assert dead_letters.newest() == [] and dead_letters.count() == 0
    dead_letters.add("job", KEY, "delivered 4 times")
    dead_letters.add("job2", OTHER, "delivered 5 times")
    letters = dead_letters.newest()
    assert [d["job_id"] for d in letters] == ["job2", "job"]  # newest first
    assert letters[1]["key"] == str(KEY) and letters[1]["reason"] == "delivered 4 times"
    assert len(dead_letters.newest(limit=1)) == 1
    assert dead_letters.count() == 2


def check_dead_letters_are_counted_dropped_and_cleared(h: Harness, tmp: Path) -> None:
    dead_letters = h.make(tmp).dead_letters
    dead_letters.add("a", KEY, "delivered 4 times")
    dead_letters.add("b", OTHER, "delivered 4 times")
    dead_letters.add("c", KEY, "delivered 5 times")
    assert dead_letters.counts() == {"vision.summarize": 2, "audio.transcribe": 1}
    dropped = dead_letters.drop("c")
    assert dropped is not None and dropped["key"] == str(KEY)
    assert dead_letters.drop("c") is None  # gone: nothing more to drop
    assert [d["job_id"] for d in dead_letters.newest()] == ["b", "a"]
    assert dead_letters.clear() == 2
    assert dead_letters.newest() == [] and dead_letters.counts() == {}
    assert dead_letters.count() == 0


CHECKS: list[Check] = [
    check_dead_letters_are_listed_newest_first,
    check_dead_letters_are_counted_dropped_and_cleared,
]
