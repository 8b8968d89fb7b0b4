"""`mcp-media wyoming` as a real process, and the `wyoming` package's own async client
speaking to it as Home Assistant does (one connection per request)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from wyoming.client import AsyncClient, AsyncTcpClient
from wyoming.event import Event

from tests.support.cluster import ROOT, Cluster
from tests.support.net import free_port, wait_for_port

READ_TIMEOUT = 300.0


@dataclass(frozen=True)
class WyomingDoor:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self) -> AsyncClient:
        return AsyncTcpClient("127.0.0.1", self.port)


def wyoming_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "workers.cli.main", "wyoming", *args]


@contextmanager
def wyoming(
    cluster: Cluster, *args: str, host: str = "127.0.0.1", **env: str
) -> Iterator[WyomingDoor]:
    """The door on a free port of `host` (more flags in `args`), reached on loopback."""
    port = free_port()
    log = cluster.home / "logs" / f"wyoming-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = wyoming_command("--uri", f"tcp://{host}:{port}", *args)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=cluster.env(**env), stdout=subprocess.DEVNULL, stderr=out
        )
    try:
        wait_for_port(port, proc, log)
        yield WyomingDoor(port, proc, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def exchange(
    client: AsyncClient, events: Sequence[Event], until: Sequence[str], errors: bool = True
) -> list[Event]:
    """Send `events` on one connection, then read until an event of a type in `until` (or,
    with `errors`, an `error`), or the end of the connection."""
    got: list[Event] = []
    async with client:
        for event in events:
            await client.write_event(event)
        while True:
            found = await asyncio.wait_for(client.read_event(), READ_TIMEOUT)
            if found is None:
                return got
            got.append(found)
            if found.type in until or (errors and found.type == "error"):
                return got


def run(
    client: AsyncClient, events: Sequence[Event], until: Sequence[str], errors: bool = True
) -> list[Event]:
    return asyncio.run(exchange(client, events, until, errors))
