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


def everything(cluster: Cluster, mark: str, **env: str) -> Any:
    """The proxy over HTTP in front of server-everything, its processes marked `mark`."""
    return mcp_door(cluster, "proxy", "--", *UPSTREAM_EVERYTHING, UPSTREAM_MARK=mark, **env)


async def watch_most(mark: str, most: list[int]) -> None:
    """Keeps in `most[0]` the most upstream processes of this test seen at once."""
    while True:
        most[0] = max(most[0], len(_pids_marked(mark)))
        await anyio.sleep(0.05)


async def uris(client: Client) -> set[str]:
    listed = await client.list_resources(cache_mode="refresh")
    return {str(resource.uri) for resource in listed.resources}


@pytest.mark.parametrize("spares", [0, 1])
def test_two_2026_clients_do_not_see_each_others_upstream_state(
    cluster: Cluster, spares: int
) -> None:
    """A makes a session resource on server-everything; B cannot list or read it (with one
    shared upstream session, as before, B saw it). A request's sessions last that request:
    A's next request does not see it either, and once requests end only the spares run (a
    spare is one request's, never handed to a second)."""
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
            await settle(mark, spares)  # every request's upstream stopped when it ended

    with everything(cluster, mark, MCP_MEDIA_MCP__SPARE_SESSIONS=str(spares)) as door:
        anyio.run(scenario, *door)


def test_each_2026_request_takes_a_warm_spare_once_and_a_new_one_starts(
    cluster: Cluster,
) -> None:
    """SPARE_SESSIONS=1, MAX_SESSIONS=2: each sequential call is served by the spare started
    ahead (its upstream process ends with the request) while a new spare starts; never more
    than two upstream processes; a spare whose upstream died is not handed out."""
    mark = uuid.uuid4().hex
    most = [0]

    async def scenario(url: str, token: str) -> None:
        async with modern_client(url, token) as client, anyio.create_task_group() as tasks:
            tasks.start_soon(watch_most, mark, most)
            await client.call_tool("echo", {"message": "first"})  # spares start from here
            for n in range(4):
                await settle(mark, 1)
                (spare,) = _pids_marked(mark)
                if n == 3:  # its upstream dies: the next call starts a set of its own
                    os.kill(spare, signal.SIGKILL)
                    await anyio.sleep(2)  # for the proxy to read the pipe's end
                answer = await client.call_tool("echo", {"message": f"call {n}"})
                assert texts(answer) == [f"Echo: call {n}"]
                with anyio.fail_after(GUARD_S):
                    while spare in _pids_marked(mark):  # used by that request, then stopped
                        await anyio.sleep(0.05)
            await settle(mark, 1)  # a fresh spare, ready for the next request
            tasks.cancel_scope.cancel()

    with everything(
        cluster,
        mark,
        MCP_MEDIA_MCP__MAX_SESSIONS="2",
        MCP_MEDIA_MCP__SPARE_SESSIONS="1",
    ) as door:
        anyio.run(scenario, *door)
    assert 1 <= most[0] <= 2


def test_shared_2026_sessions_are_one_upstream_set_as_before(cluster: Cluster) -> None:
    """MODERN_SESSIONS=shared (for upstreams that keep no per-session state): all 2026
    requests use one upstream session, so B does see the resource A made, and one upstream
    process serves every request."""
    mark = uuid.uuid4().hex

    async def scenario(url: str, token: str) -> None:
        async with modern_client(url, token) as a, modern_client(url, token) as b:
            made = await a.call_tool("gzip-file-as-resource", {"name": "a.txt.gz", "data": SECRET})
            (link,) = [block for block in made.content if isinstance(block, types.ResourceLink)]
            await settle(mark, 1)
            (pid,) = _pids_marked(mark)
            assert str(link.uri) in await uris(b)  # the clients share upstream state
            for n in range(3):
                await b.call_tool("echo", {"message": f"call {n}"})
            assert _pids_marked(mark) == [pid]

    with everything(cluster, mark, MCP_MEDIA_MCP__MODERN_SESSIONS="shared") as door:
        anyio.run(scenario, *door)


def test_2026_requests_sessions_are_bounded_and_none_outlives_the_proxy(
    cluster: Cluster,
) -> None:
    """MAX_SESSIONS=2 (one of them a spare's): five long calls at once all finish, at most
    two holding an upstream process at a time (the others wait for one to end); a call in
    flight when the proxy is stopped leaves neither its upstream nor the spare running."""
    mark = uuid.uuid4().hex
    most = [0]
    outcomes: list[Any] = []
    upstream: list[int] = []
    left: list[int] = []

    async def scenario(url: str, token: str) -> None:
        async def long_call(client: Client) -> None:
            try:
                args = {"duration": 4, "steps": 4}
                outcomes.append(await client.call_tool("trigger-long-running-operation", args))
            except Exception as exc:  # the refusal, as the client sees it
                outcomes.append(exc)

        async with modern_client(url, token) as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch_most, mark, most)
                with anyio.fail_after(GUARD_S):
                    async with anyio.create_task_group() as calls:
                        for _ in range(5):
                            calls.start_soon(long_call, client)
                tasks.cancel_scope.cancel()
            await settle(mark, 1)  # the spare

        # Then one call in flight when the proxy is stopped (its client fails on the way out).
        with suppress(Exception), anyio.fail_after(GUARD_S):
            async with modern_client(url, token) as client, anyio.create_task_group() as tasks:
                tasks.start_soon(long_call, client)
                await settle(mark, 2)  # the call's (the spare it took) and a new spare
                upstream.extend(_pids_marked(mark))
                proxy = _parent(upstream[0])
                os.kill(proxy, signal.SIGTERM)
                while _alive([proxy]):
                    await anyio.sleep(0.05)
                left.extend(_alive(upstream))  # at the moment the proxy is gone
                tasks.cancel_scope.cancel()

    with everything(cluster, mark, MCP_MEDIA_MCP__MAX_SESSIONS="2") as door:
        anyio.run(scenario, *door)
    finished = outcomes[:5]
    assert all(isinstance(o, types.CallToolResult) for o in finished), finished
    assert all("Long running operation completed" in texts(o)[0] for o in finished)
    assert most[0] == 2  # two at a time, never more
    assert len(upstream) == 2 and left == []


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

    with mcp_door(
        cluster, "proxy", "--", *TICKING, UPSTREAM_MARK=mark, MCP_MEDIA_MCP__SPARE_SESSIONS="0"
    ) as door:
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
