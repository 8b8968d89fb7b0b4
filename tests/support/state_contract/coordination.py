"""The coordination port: named locks held with a token, named reports, paused queues."""

from __future__ import annotations

from pathlib import Path

from tests.support.state_contract.common import Check, Harness


def check_pauses_locks_and_reports(h: Harness, tmp: Path) -> None:
    coordination = h.make(tmp).coordination
    coordination.set_paused("stt", True)
    coordination.set_paused("vision", True)
    coordination.set_paused("vision", False)
    assert coordination.paused_queues() == {"stt"}
    assert coordination.take_lock("reprocess:image", "mine", 30)
    assert not coordination.take_lock("reprocess:image", "theirs", 30)
    assert coordination.take_lock("reprocess:audio", "theirs", 30)  # locks are per name
    assert not coordination.renew_lock("reprocess:image", "theirs", 30)
    coordination.release_lock("reprocess:image", "theirs")  # not the holder: nothing changes
    assert coordination.locked("reprocess:image")
    assert coordination.renew_lock("reprocess:image", "mine", 30)
    coordination.release_lock("reprocess:image", "mine")
    assert not coordination.locked("reprocess:image")
    assert coordination.report("reprocess-progress:image") is None
    coordination.put_report("reprocess-progress:image", {"done": 3, "running": True}, 60)
    assert coordination.report("reprocess-progress:image") == {"done": 3, "running": True}


def check_locks_and_reports_expire(h: Harness, tmp: Path) -> None:
    coordination = h.make(tmp).coordination
    assert coordination.take_lock("reprocess:image", "dead", 0.2)
    coordination.put_report("job-progress:short", {"done_s": 1.0}, 1)
    coordination.put_report("job-progress:long", {"done_s": 2.0}, 60)
    h.wait(1.5)
    assert not coordination.locked("reprocess:image")
    assert coordination.take_lock("reprocess:image", "next", 30)
    assert not coordination.renew_lock("reprocess:image", "dead", 30)
    assert coordination.report("job-progress:short") is None
    assert coordination.report("job-progress:long") == {"done_s": 2.0}


CHECKS: list[Check] = [check_pauses_locks_and_reports, check_locks_and_reports_expire]
