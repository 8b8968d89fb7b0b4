"""The in-memory twins of the shared state keep each port's contract (the same checks as the
Redis adapters), with time moved by a clock of their own."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from pipelines.media import Capability
from pipelines.results import ResultKey, Sidecars
from tests.support import state_contract as contract
from workers.state.admission import Submission
from workers.state.roster import MemoryRoster
from workers.state.shared_state import SharedState, memory_state
from workers.state.state_view import SharedStateView

pytestmark = pytest.mark.unit
RESULT_TTL = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def announce(state: SharedState, name: str, announcement: dict[str, Any]) -> None:
    view = state.view
    assert isinstance(view, SharedStateView) and isinstance(view.roster, MemoryRoster)
    view.roster.announce(name, announcement)


def enqueue(state: SharedState, queue: str, count: int) -> None:
    """Jobs admitted to `queue` that no worker started: what the twin counts as waiting."""
    for n in range(count):
        version = hashlib.sha256(queue.encode()).hexdigest()[:12]  # a key per queue
        key = ResultKey(Capability.AUDIO_TRANSCRIBE, version, f"{n:064x}")
        assert state.admission.admit(Submission(key, f"{queue}{n}", 600, queue)).job_id


@pytest.mark.parametrize(
    ("port", "check"), contract.CHECKS, ids=lambda c: getattr(c, "__name__", c)
)
def test_contract(port: str, check: contract.Check, tmp_path: Path) -> None:
    clock = Clock()
    harness = contract.Harness(
        make=lambda root: memory_state(Sidecars(root / "results"), clock, RESULT_TTL),
        wait=clock.advance,
        announce=announce,
        enqueue=enqueue,
        expire_entries=lambda _state: clock.advance(RESULT_TTL),
    )
    check(harness, tmp_path)


def test_answers_is_the_dedup_rule() -> None:
    contract.admission.check_answers_is_the_dedup_rule()
