"""The job records port: what re-sending a job needs, and its deliveries counted against the
cap; both expire by themselves."""

from __future__ import annotations

from pathlib import Path

from tests.support.state_contract.common import Check, Harness


def check_deliveries_are_counted_per_job(h: Harness, tmp: Path) -> None:
    records = h.make(tmp).records
    assert [records.count_delivery("job:0", 60) for _ in range(3)] == [1, 2, 3]
    assert records.count_delivery("job:1", 60) == 1  # counted per name
    records.uncount_delivery("job:0")  # a delivery that ran nothing is taken back
    assert records.count_delivery("job:0", 60) == 3


def check_a_job_is_recorded_read_and_forgotten(h: Harness, tmp: Path) -> None:
    records = h.make(tmp).records
    assert records.job_record("j1") is None
    records.record_job("j1", {"task": "t", "kwargs": {"path": "/x"}}, 60)
    assert records.job_record("j1") == {"task": "t", "kwargs": {"path": "/x"}}
    records.forget_record("j1")
    assert records.job_record("j1") is None
    records.forget_record("never-recorded")  # nothing to forget: no error


def check_records_and_counts_expire(h: Harness, tmp: Path) -> None:
    records = h.make(tmp).records
    records.record_job("short", {"task": "t"}, 1)
    records.record_job("long", {"task": "t"}, 60)
    assert records.count_delivery("short", 1) == 1
    h.wait(1.5)
    assert records.job_record("short") is None
    assert records.job_record("long") == {"task": "t"}
    assert records.count_delivery("short", 1) == 1  # counted afresh


CHECKS: list[Check] = [
    check_deliveries_are_counted_per_job,
    check_a_job_is_recorded_read_and_forgotten,
    check_records_and_counts_expire,
]
