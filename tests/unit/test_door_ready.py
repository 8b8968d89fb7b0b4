"""The door answers its first requests before it opens its job machinery: building it asks
nothing of the job gateway (opening one imports the job path and looks for a broker), which
opens once tools/list is answered, or at its first use."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from workers.core.settings import Settings
from workers.doors.mcp.rewriter import DoorOptions
from workers.doors.mcp.serve import build_proxy

pytestmark = pytest.mark.unit


class Opener:
    def __init__(self) -> None:
        self.opened = threading.Event()
        self.gateway: Any = type("Gateway", (), {"runs_here": True})()

    def __call__(self) -> Any:
        self.opened.set()
        return self.gateway


def test_building_the_door_leaves_the_job_gateway_closed(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path)})
    opener = Opener()
    proxy = build_proxy(settings, [], DoorOptions(), opener)
    assert not opener.opened.is_set()
    assert proxy.tasks.gateway is opener.gateway  # opened at its first use
    assert opener.opened.is_set()

    async def served_and_stopped() -> None:  # as the door ends: nothing left open
        async with anyio.create_task_group() as group:
            await proxy.run_upstreams(group)
            await anyio.sleep(0)
            group.cancel_scope.cancel()
        await proxy.close()

    anyio.run(served_and_stopped)
