"""Zeroconf discovery of the Wyoming door: announced as NAME._wyoming._tcp.local. at its
address and port while it runs (the `zeroconf` package's own client finds it, as Home
Assistant does), withdrawn when it stops; refused where other machines could not reach it."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from zeroconf.asyncio import AsyncZeroconf

from tests.support.cluster import Cluster
from tests.support.net import free_port
from tests.support.wyoming_door import wyoming
from workers.doors.wyoming.discovery import SERVICE, announced_host

pytestmark = pytest.mark.integration

LOOKUP_MS = 10_000  # far past an mDNS answer on this machine: an absent service shows as None


def look_up(name: str) -> tuple[int, list[str]] | None:
    """The port and addresses announced under `name`, or None when nothing answers."""

    async def go() -> tuple[int, list[str]] | None:
        browser = AsyncZeroconf()
        try:
            found = await browser.async_get_service_info(SERVICE, f"{name}.{SERVICE}", LOOKUP_MS)
        finally:
            await browser.async_close()
        if found is None or found.port is None:
            return None
        return found.port, found.parsed_addresses()

    return asyncio.run(go())


def test_the_door_is_announced_while_it_runs_and_withdrawn_after(cluster: Cluster) -> None:
    name = f"mcp-media-test-{secrets.token_hex(4)}"
    env = {"MCP_MEDIA_WYOMING__ZEROCONF": name}
    with wyoming(cluster, "--allow-remote", host="0.0.0.0", **env) as door:
        assert look_up(name) == (door.port, [announced_host("0.0.0.0")])
    assert look_up(name) is None


@pytest.mark.parametrize("uri", ["tcp://127.0.0.1:{port}", "unix://{home}/w.sock"])
def test_zeroconf_is_refused_where_other_machines_cannot_reach(cluster: Cluster, uri: str) -> None:
    address = uri.format(port=free_port(), home=cluster.home)
    refused = cluster.cli("wyoming", "--uri", address, "--zeroconf")
    assert refused.returncode == 2
    assert "--zeroconf announces the door to other machines" in refused.stderr
