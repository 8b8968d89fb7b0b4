"""Where a run stopped counts only for the same selection under the same versions, and a
run that reached its end leaves nothing to resume."""

from __future__ import annotations

from datetime import datetime

import pytest

from pipelines.media import MediaKind
from workers.core.operations import Selection
from workers.gateways.reprocess_plan import Checkpoint, Plan
from workers.state.coordination import MemoryCoordination

pytestmark = pytest.mark.unit

IMAGES = Selection(kinds=(MediaKind.IMAGE,), mode="all")
SHA = "ab" * 32


def test_a_stopped_run_is_resumed_by_the_same_selection_only() -> None:
    coordination = MemoryCoordination()
    plan = Plan(MediaKind.IMAGE, "0a1b")
    Checkpoint(coordination, IMAGES).submitted(plan, SHA, 7)
    assert Checkpoint(coordination, IMAGES).resume(plan) == Plan(MediaKind.IMAGE, "0a1b", SHA, 7)
    for other, version in (
        (Selection(kinds=(MediaKind.IMAGE,), mode="missing"), "0a1b"),
        (Selection(kinds=(MediaKind.IMAGE,), mode="all", limit=5), "0a1b"),
        (Selection(kinds=(MediaKind.IMAGE,), mode="all", since=datetime(2026, 1, 1)), "0a1b"),
        (IMAGES, "ffff"),  # a new model or prompt: its plan starts from the beginning
    ):
        fresh = Plan(MediaKind.IMAGE, version)
        assert Checkpoint(coordination, other).resume(fresh) == fresh


def test_a_run_that_reached_its_end_leaves_nothing_to_resume() -> None:
    coordination = MemoryCoordination()
    plan = Plan(MediaKind.AUDIO, "0a1b")
    checkpoint = Checkpoint(coordination, IMAGES)
    checkpoint.submitted(plan, SHA, 3)
    checkpoint.complete(plan)
    assert Checkpoint(coordination, IMAGES).resume(plan) == plan
    assert Checkpoint(coordination, IMAGES).resume(Plan(MediaKind.IMAGE, "0a1b")).after == ""
