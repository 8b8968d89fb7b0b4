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


async def served_and_stopped(proxy: Any) -> None:
    """As the door ends: nothing left open."""
    async with anyio.create_task_group() as group:
        await proxy.run_upstreams(group)
        await anyio.sleep(0)
        group.cancel_scope.cancel()
    await proxy.close()


def test_building_the_door_leaves_the_job_gateway_closed(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path)})
    opener = Opener()
    proxy = build_proxy(settings, [], DoorOptions(), opener)
    assert not opener.opened.is_set()
    assert proxy.tasks.gateway is opener.gateway  # opened at its first use
    assert opener.opened.is_set()

    anyio.run(served_and_stopped, proxy)


def test_closing_a_door_that_never_opened_its_gateway_does_not_open_it(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path)})
    opener = Opener()
    proxy = build_proxy(settings, [], DoorOptions(), opener)
    proxy.rewriter.close()
    proxy.rewriter.close()  # on a signal, then as the door returns
    assert not opener.opened.is_set()
    with pytest.raises(RuntimeError, match="closed"):
        proxy.rewriter.gateway  # noqa: B018  (a use after close fails at once, never hangs)
    anyio.run(served_and_stopped, proxy)
