"""Clients of the 2026-07-28 revision over streamable HTTP (no session: every request carries
its own envelope) behind a real `mcp-media proxy`: each request gets upstream sessions of its
own, so no client sees another's upstream state; a listen stream holds its own while it is
open; the sessions are bounded and stop when their request ends or the proxy stops."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.integration.conftest import Cluster
from tests.integration.test_mcp_http import mcp_door
from tests.integration.test_mcp_protocol import UPSTREAM_EVERYTHING, _alive, _zombie
from tests.integration.test_mcp_proxy import proxied, texts

pytestmark = pytest.mark.integration

TICKING = [sys.executable, "-m", "tests.support.ticking_upstream"]
GUARD_S = 60  # a guard against a hang, not a measure
SECRET = "data:text/plain;base64,aGVsbG8gZnJvbSBB"


@asynccontextmanager
async def modern_client(url: str, token: str) -> AsyncIterator[Client]:
    """The SDK client as it comes (discovers the server, speaks 2026-07-28)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client,
    ):
        assert client.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        yield client


def _pids_marked(mark: str) -> list[int]:
    """The upstream processes started with UPSTREAM_MARK=mark (the proxy has it too)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        marked = f"UPSTREAM_MARK={mark}".encode() in environ.split(b"\0")
        if marked and b"workers.cli.main" not in cmdline and not _zombie(int(entry.name)):
            found.append(int(entry.name))
    return found


async def settle(mark: str, count: int) -> None:
    """Until `count` upstream processes of this test run."""
    with anyio.fail_after(GUARD_S):
        while len(_pids_marked(mark)) != count:
            await anyio.sleep(0.1)


async def uris(client: Client) -> set[str]:
    listed = await client.list_resources(cache_mode="refresh")
    return {str(resource.uri) for resource in listed.resources}


def test_two_2026_clients_do_not_see_each_others_upstream_state(cluster: Cluster) -> None:
    """A makes a session resource on server-everything; B cannot list or read it (with one
    shared upstream session, as before, B saw it). A request's sessions last that request:
    A's next request does not see it either, and no upstream runs once requests end."""
    mark = uuid.uuid4().hex

    async def scenario(url: str, token: str) -> None:
        async with modern_client(url, token) as a, modern_client(url, token) as b:
            made = await a.call_tool("gzip-file-as-resource", {"name": "a.txt.gz", "data": SECRET})
            (link,) = [block for block in made.content if isinstance(block, types.ResourceLink)]
            uri = str(link.uri)
            assert "a.txt.gz" in uri
            assert uri not in await uris(b)
            with pytest.raises(Exception):  # noqa: B017 - the upstream's own error
                await b.read_resource(uri)
            assert uri not in await uris(a)  # A has no session either: one request, one
            await settle(mark, 0)  # every request's upstream stopped when it ended

    with mcp_door(cluster, "proxy", "--", *UPSTREAM_EVERYTHING, UPSTREAM_MARK=mark) as door:
        anyio.run(scenario, *door)


def test_2026_requests_sessions_are_bounded_and_none_outlives_the_proxy(
    cluster: Cluster,
) -> None:
    """MAX_SESSIONS=2: five long calls at once all finish, at most two holding an upstream
    process at a time (the others wait for one to end); a call in flight when the proxy is
    stopped does not leave its upstream running."""
    mark = uuid.uuid4().hex
    most = 0
    outcomes: list[Any] = []
    upstream: list[int] = []
    left: list[int] = []

    async def scenario(url: str, token: str) -> None:
        nonlocal most

        async def long_call(client: Client) -> None:
            try:
                args = {"duration": 4, "steps": 4}
                outcomes.append(await client.call_tool("trigger-long-running-operation", args))
            except Exception as exc:  # the refusal, as the client sees it
                outcomes.append(exc)

        async with modern_client(url, token) as client:

            async def watch() -> None:
                nonlocal most
                while True:
                    most = max(most, len(_pids_marked(mark)))
                    await anyio.sleep(0.05)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch)
                with anyio.fail_after(GUARD_S):
                    async with anyio.create_task_group() as calls:
                        for _ in range(5):
                            calls.start_soon(long_call, client)
                tasks.cancel_scope.cancel()
            await settle(mark, 0)

        # Then one call in flight when the proxy is stopped (its client fails on the way out).
        with suppress(Exception), anyio.fail_after(GUARD_S):
            async with modern_client(url, token) as client, anyio.create_task_group() as tasks:
                tasks.start_soon(long_call, client)
                await settle(mark, 1)
                upstream.extend(_pids_marked(mark))
                proxy = _parent(upstream[0])
                os.kill(proxy, signal.SIGTERM)
                while _alive([proxy]):
                    await anyio.sleep(0.05)
                left.extend(_alive(upstream))  # at the moment the proxy is gone
                tasks.cancel_scope.cancel()

    with mcp_door(
        cluster,
        "proxy",
        "--",
        *UPSTREAM_EVERYTHING,
        UPSTREAM_MARK=mark,
        MCP_MEDIA_MCP__MAX_SESSIONS="2",
    ) as door:
        anyio.run(scenario, *door)
    finished = outcomes[:5]
    assert all(isinstance(o, types.CallToolResult) for o in finished), finished
    assert all("Long running operation completed" in texts(o)[0] for o in finished)
    assert most == 2  # two at a time, never more
    assert len(upstream) == 1 and left == []


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("PPid:")]
    return int(line.split()[1])


def test_a_2026_listen_stream_hears_what_it_subscribed_from_its_own_session(
    cluster: Cluster,
) -> None:
    """Two clients listen, each to its own resource: each stream holds an upstream session,
    subscribed upstream to that resource, and hears its updates (and list changes) only;
    both sessions stop when the streams close."""
    mark = uuid.uuid4().hex

    async def scenario(url: str, token: str) -> None:
        async with modern_client(url, token) as a, modern_client(url, token) as b:
            heard: dict[str, list[Any]] = {"a": [], "b": []}

            async def hear(client: Client, name: str, ready: anyio.Event) -> None:
                uri = f"tick://{name}"
                async with client.listen(
                    tools_list_changed=True, resource_subscriptions=[uri]
                ) as sub:
                    ready.set()
                    async for event in sub:
                        heard[name].append(event)
                        kinds = {type(e).__name__ for e in heard[name]}
                        if {"ResourceUpdated", "ToolsListChanged"} <= kinds:
                            return

            with anyio.fail_after(GUARD_S):
                async with anyio.create_task_group() as tasks:
                    ready = [anyio.Event(), anyio.Event()]
                    tasks.start_soon(hear, a, "a", ready[0])
                    tasks.start_soon(hear, b, "b", ready[1])
                    for event in ready:
                        await event.wait()
                    assert len(_pids_marked(mark)) == 2  # a session each
            for name, events in heard.items():
                updated = {str(e.uri) for e in events if type(e).__name__ == "ResourceUpdated"}
                assert updated == {f"tick://{name}"}, (name, events)
            await settle(mark, 0)

    with mcp_door(cluster, "proxy", "--", *TICKING, UPSTREAM_MARK=mark) as door:
        anyio.run(scenario, *door)


def test_a_2026_listen_over_stdio_hears_the_resource_it_named(cluster: Cluster) -> None:
    """Over stdio (one client: one set of upstream sessions) the resources a listen stream
    names are subscribed upstream too, for as long as it is open."""

    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--", *TICKING) as client:
            assert client.session.protocol_version in MODERN_PROTOCOL_VERSIONS
            async with client.listen(resource_subscriptions=["tick://a"]) as events:
                with anyio.fail_after(GUARD_S):
                    event = await events.__anext__()
            assert isinstance(event, ResourceUpdated) and str(event.uri) == "tick://a"

    anyio.run(scenario)
