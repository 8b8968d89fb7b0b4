"""The order a worker asks Redis for its queues (`workers.broker.lanes.LaneCycle`): live lanes
before batch lanes, and the batch lanes' floor share over many fetches."""

from __future__ import annotations

from collections import Counter

import pytest
from kombu.utils.scheduling import cycle_by_name

from workers.broker.celery_config import base_app
from workers.broker.lanes import LANE_ORDER, LaneCycle, is_batch
from workers.core.capabilities import lane_queues
from workers.core.settings import Settings

pytestmark = pytest.mark.unit

QUEUES = lane_queues(["vision", "stt"])  # vision, vision.batch, stt, stt.batch


def fetch(cycle: LaneCycle, waiting: set[str]) -> str | None:
    """One BRPOP: the first queue in the cycle's order that has work; kombu rotates it."""
    for queue in cycle.consume(len(cycle.items)):
        if queue in waiting:
            return cycle.rotate(queue)
    return None


def test_live_lanes_come_before_batch_lanes() -> None:
    cycle = LaneCycle(QUEUES)
    assert cycle.consume(4) == ["vision", "stt", "vision.batch", "stt.batch"]
    assert [is_batch(q) for q in QUEUES] == [False, True, False, True]
    assert not is_batch("celery")  # not a lane of ours: consumed like a live one


def test_queues_of_one_lane_take_turns() -> None:
    cycle = LaneCycle(QUEUES)
    assert fetch(cycle, {"vision", "stt", "vision.batch"}) == "vision"
    assert cycle.consume(4) == ["stt", "vision", "vision.batch", "stt.batch"]
    assert fetch(cycle, {"vision", "stt", "vision.batch"}) == "stt"
    assert fetch(cycle, {"vision", "stt", "vision.batch"}) == "vision"


def test_batch_keeps_its_floor_share_under_a_steady_live_stream() -> None:
    cycle = LaneCycle(QUEUES)
    cycle.every = 10
    taken = Counter(fetch(cycle, set(QUEUES)) for _ in range(10_000))
    batch = taken["vision.batch"] + taken["stt.batch"]
    assert batch == 1_000  # exactly one fetch in ten
    assert taken["vision.batch"] == taken["stt.batch"]  # batch lanes take turns too
    assert taken["vision"] == taken["stt"]


def test_the_floor_is_one_fetch_in_every_not_more() -> None:
    cycle = LaneCycle(QUEUES)
    cycle.every = 4
    order = [fetch(cycle, set(QUEUES)) for _ in range(12)]
    assert [q is not None and is_batch(q) for q in order] == [False, False, False, True] * 3


def test_live_work_takes_every_fetch_while_batch_waits_behind_it_only_to_its_floor() -> None:
    cycle = LaneCycle(QUEUES)
    cycle.every = 10
    assert [fetch(cycle, {"vision"}) for _ in range(30)] == ["vision"] * 30
    # Batch work arrives after a long live run: it has waited its floor, it goes next once.
    assert fetch(cycle, {"vision", "vision.batch"}) == "vision.batch"
    assert [fetch(cycle, {"vision", "vision.batch"}) for _ in range(9)] == ["vision"] * 9
    assert fetch(cycle, {"stt.batch"}) == "stt.batch"  # no live work: batch has every slot
    assert fetch(cycle, set()) is None


def test_the_cycle_kombu_builds_is_ours_with_the_floor_of_the_settings() -> None:
    assert cycle_by_name(LANE_ORDER) is LaneCycle  # type: ignore[no-untyped-call]
    settings = Settings.from_env(
        {"MCP_MEDIA_HOME": "/nonexistent", "MCP_MEDIA_JOBS__BATCH_EVERY": "7"}
    )
    app = base_app(settings, "redis://127.0.0.1:1/0")
    try:
        assert app.conf.broker_transport_options["batch_every"] == 7
        consumed = {q.name for q in app.conf.task_queues}
        assert consumed == set(lane_queues())
    finally:
        app.close()
