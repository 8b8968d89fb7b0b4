"""The in-memory twin's queue signals (`serve --inline`, unit tests): what its admission
twin holds, by its clock. The Redis side is tests/integration/test_queue_signals.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.media import Capability
from pipelines.results import ResultKey, Sidecars
from workers.core.cluster_view import QueueSignals
from workers.state.admission import Submission
from workers.state.shared_state import memory_state

pytestmark = pytest.mark.unit


def test_the_twin_ages_the_oldest_waiting_job_and_counts_a_started_one(tmp_path: Path) -> None:
    now = [1000.0]
    state = memory_state(Sidecars(tmp_path / "results"), lambda: now[0])
    for n in range(2):
        key = ResultKey(Capability.AUDIO_TRANSCRIBE, "abc123", f"{n:064x}")
        state.admission.admit(Submission(key, f"job{n}", 600, "stt"))
        now[0] += 5.0
    assert state.view.queue_signals(["stt"])["stt"] == QueueSignals(2, 0, 0, 10.0, 0.0)
    state.admission.started("stt", "job0")  # the oldest leaves the waiting ones
    now[0] += 1.0
    signals = state.view.queue_signals(["stt", "stt.batch"])
    assert signals["stt"] == QueueSignals(1, 1, 1, 6.0, 0.0)
    # The running jobs are the capability's: both lanes share its slots and show them.
    assert signals["stt.batch"] == QueueSignals(0, 0, 1, 0.0, 0.0)
