"""How long a 2026-07-28 HTTP request's upstream sessions (`RequestPeers`) live: until the
request is answered, or later while a task that used them (a task's call) still runs."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.connection import Connection

from workers.mcp.peers import Peer, RequestPeers
from workers.settings import McpSettings

pytestmark = pytest.mark.unit


def request() -> Connection:
    return Connection.from_envelope("2026-07-28", None, None)


def test_a_requests_peer_is_closed_when_it_is_answered_or_its_last_task_ends() -> None:
    made: list[Peer] = []

    def start(connection: Connection) -> Peer:
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
