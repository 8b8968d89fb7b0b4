"""Admission by expected wait: the arithmetic (`workers.core.wait_estimate`), the measured
mean, the Retry-After."""

from __future__ import annotations

import pytest

from workers.core.gateway import QueueBusy
from workers.core.wait_estimate import expected_wait, next_mean, retry_after

pytestmark = pytest.mark.unit


def test_a_job_that_starts_at_once_has_no_expected_wait() -> None:
    assert expected_wait(0, 0, 2, 5.0) is None
    assert expected_wait(0, 1, 2, 500.0) is None  # one slot free: refusing would not help
    assert expected_wait(3, 0, 2, 0.0) is None  # nothing measured yet
    assert expected_wait(3, 0, 0, 5.0) is None  # no slot: the door's 503 says so


def test_expected_wait_counts_the_work_ahead_per_slot() -> None:
    # every slot busy: one job finishes every mean/slots s; this one starts after ahead-slots+1
    assert expected_wait(0, 2, 2, 4.0) == 6.0
    assert expected_wait(10, 2, 2, 4.0) == 11 * 2.0 + 4.0
    assert expected_wait(10, 7, 2, 4.0) == expected_wait(10, 2, 2, 4.0)  # at most one per slot
    assert expected_wait(30, 2, 2, 1.2) == pytest.approx(31 * 0.6 + 1.2)


def test_the_mean_averages_the_first_jobs_then_moves() -> None:
    mean = 0.0
    for samples, seconds in enumerate((2.0, 4.0, 6.0)):
        mean = next_mean(mean, samples, seconds)
    assert mean == pytest.approx(4.0)
    later = next_mean(4.0, 100, 14.0)
    assert later == pytest.approx(6.0)  # the newest job weighs 0.2


def test_retry_after_is_the_excess_over_the_bound_in_whole_seconds() -> None:
    assert retry_after(12.0, 10.0) == 2
    assert retry_after(10.2, 10.0) == 1
    busy = QueueBusy("stt", 31.5, 25.0)
    assert busy.retry_after == 7
    assert "retry in 7 s" in str(busy) and "'stt'" in str(busy) and "25 s" in str(busy)
