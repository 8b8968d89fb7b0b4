"""How long a 2026-07-28 HTTP request's upstream sessions (`RequestPeers`) live: until the
request is answered, or later while a task that used them (a task's call) still runs."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.connection import Connection
from pydantic import ValidationError

from workers.core.door_settings import McpSettings
from workers.doors.mcp.peers import Peer, RequestPeers

pytestmark = pytest.mark.unit


def request() -> Connection:
    return Connection.from_envelope("2026-07-28", None, None)


def test_a_requests_peer_is_closed_when_it_is_answered_or_its_last_task_ends() -> None:
    made: list[Peer] = []

    def start(connection: Connection | None) -> Peer:
        made.append(Peer([], McpSettings(), None, None, lambda *_: None))
        return made[-1]

    async def scenario() -> None:
        peers = RequestPeers(start, limit=4)
        async with anyio.create_task_group() as group:
            group.start_soon(peers.reap, group)
            answered = request()
            peer = peers.peer(answered)
            assert peers.peer(answered) is peer  # one per request
            await answered.exit_stack.aclose()  # the SDK closes it once the request is answered
            with anyio.fail_after(5):
                while peers.peers():
                    await anyio.sleep(0.01)

            # A task started by the request (an MCP task's call) keeps it past the answer.
            outlived, release = request(), anyio.Event()

            async def call() -> None:
                peers.peer(outlived)
                await release.wait()

            group.start_soon(call)
            await anyio.sleep(0.05)
            await outlived.exit_stack.aclose()
            await anyio.sleep(0.05)
            assert peers.live.get(outlived) is made[-1]  # the call still holds it
            release.set()
            with anyio.fail_after(5):
                while peers.peers():
                    await anyio.sleep(0.01)
            assert len(made) == 2
            group.cancel_scope.cancel()

    anyio.run(scenario)


def test_a_request_takes_a_spare_once_and_a_replacement_is_started() -> None:
    made: list[Peer] = []
    running: list[tuple[anyio.abc.TaskGroup, anyio.CapacityLimiter]] = []

    def start(connection: Connection | None) -> Peer:
        made.append(Peer([], McpSettings(), connection, None, lambda *_: None))
        made[-1].start(*running[0])  # in its slot, as the proxy does
        return made[-1]

    async def scenario() -> None:
        peers = RequestPeers(start, limit=4, spares=1)
        async with anyio.create_task_group() as group:
            running.append((group, peers.slots))
            group.start_soon(peers.reap, group)
            await anyio.sleep(0)
            first = request()
            own = peers.peer(first)  # no spare yet: its own, and one spare started
            assert own.connection is first and len(peers.spares) == 1
            spare = peers.spares[0]
            with anyio.fail_after(5):
                while not spare.warmed:
                    await anyio.sleep(0.01)
            second = request()
            assert peers.peer(second) is spare and spare.connection is second
            assert len(peers.spares) == 1 and peers.spares[0] is not spare  # its replacement
            taken = {id(p) for p in peers.live.values()}
            assert len(taken) == 2 and id(peers.spares[0]) not in taken  # one request each
            peers.stop()
            await first.exit_stack.aclose()
            await second.exit_stack.aclose()
            replacement, third = peers.spares[0], request()
            assert peers.peer(third) is replacement and peers.spares == []  # none after stop
            assert len(made) == 3
            group.cancel_scope.cancel()

    anyio.run(scenario)


def test_modern_sessions_takes_request_or_shared_only() -> None:
    assert McpSettings(modern_sessions="shared").modern_sessions == "shared"
    with pytest.raises(ValidationError, match=r"must be 'request' .* or 'shared'"):
        McpSettings(modern_sessions="per-client")
