"""Scale-down loses nothing: workers sent SIGTERM mid-batch finish or hand back what they
run within their grace and exit; the batch completes on the rest, nothing lost, nothing run
twice. The scenarios are in scale_down.py (`python -m tests.faults.scale_down` repeats them
with the cores burned)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import scale_down, scenarios
from tests.faults.test_faults import check
from tests.support.cluster import Cluster

pytestmark = pytest.mark.faults


def exited(result: scenarios.Outcome) -> list[object]:
    """The exit codes of the terminated workers (None: one still ran past grace + bound)."""
    return [v["exit"] for v in result.extra.values() if isinstance(v, dict)]


def test_threads_workers_scaled_down_mid_batch(node: Cluster, tmp_path: Path) -> None:
    result = scale_down.threads_batch(node, tmp_path)
    check(result)
    assert result.completed == result.submitted, result.line()
    assert exited(result) == [0, 0], result.line()


def test_threads_workers_hand_back_mid_batch(node: Cluster, tmp_path: Path) -> None:
    result = scale_down.threads_batch(node, tmp_path, grace=0.5, latency=3.0)
    check(result)
    assert result.completed == result.submitted, result.line()
    assert exited(result) == [0, 0], result.line()


def test_prefork_worker_scaled_down_mid_batch(
    node: Cluster, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    result = scale_down.prefork_batch(node, spoken, tmp_path)
    check(result)
    assert result.completed == result.submitted, result.line()
    assert exited(result) == [0], result.line()


def test_a_job_longer_than_the_grace_is_handed_back_and_run_once(
    node: Cluster, tmp_path: Path
) -> None:
    result = scale_down.longer_than_grace(node, tmp_path)
    check(result)
    assert result.completed == result.submitted == 1, result.line()
    assert exited(result) == [0], result.line()
    victim = result.extra["victim0"]
    assert isinstance(victim, dict) and victim["handed_back"] == 1, result.line()
    assert result.extra["unfinished_at_exit"] is True, result.line()
    assert result.extra["stored_by_survivor"] == 1, result.line()
    assert result.extra["attempts"] == 1, result.line()
