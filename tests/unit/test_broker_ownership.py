"""Which process `mcp-media down` may kill as a last resort: only the redis-server it
recorded, never a pid now held by another process."""

from __future__ import annotations

import os

import pytest

from workers.broker.embedded import Broker, _owned_process, _start_ticks

pytestmark = pytest.mark.unit


def _broker(pid: int) -> Broker:
    return Broker(url="redis://127.0.0.1:1/0", pid=pid, port=1, started=False)


def test_a_pid_that_is_not_a_redis_server_on_our_port_is_not_ours() -> None:
    # This test process stands for a pid reused by something else; the server did not answer.
    assert _owned_process(_broker(os.getpid()), {}, None) is None


def test_a_server_reporting_another_pid_is_not_ours() -> None:
    assert _owned_process(_broker(os.getpid()), {"process_id": os.getpid() + 1}, None) is None


def test_a_pid_started_at_another_time_than_recorded_is_not_ours() -> None:
    me = os.getpid()
    started = _start_ticks(me)
    assert started is not None
    facts: dict[str, object] = {"process_id": me}
    moved = {"port": 1, "pid": me, "start": started + 1}
    assert _owned_process(_broker(me), facts, moved) is None
    owned = _owned_process(_broker(me), facts, {"port": 1, "pid": me, "start": started})
    assert owned is not None and owned.same()
