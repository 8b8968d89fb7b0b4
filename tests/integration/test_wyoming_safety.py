"""The Wyoming door on a network (no authentication of its own): loopback unless told
otherwise, and every connection bounded; hostile events are answered with an `error` event
or a close, and the other connections go on unharmed. A real `mcp-media wyoming` process on
a real broker (no workers: `describe` then offers nothing)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import BinaryIO, cast

import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient, AsyncUnixClient
from wyoming.error import Error
from wyoming.event import Event, read_event, write_event
from wyoming.info import Describe, Info

from tests.support.cluster import ROOT, Cluster
from tests.support.net import free_port
from tests.support.wyoming_door import WyomingDoor, exchange, run, wyoming, wyoming_command

pytestmark = pytest.mark.integration


def raw(door: WyomingDoor, data: bytes) -> list[Event | None]:
    """Send raw bytes; every event answered until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", door.port), timeout=120) as sock:
        sock.sendall(data)
        got: list[Event | None] = []
        with sock.makefile("rb") as reader:
            while True:
                event = read_event(reader)
                got.append(event)
                if event is None:
                    return got


def described(client: AsyncClient) -> Info:
    events = asyncio.run(exchange(client, [Describe().event()], ["info"]))
    assert events and events[-1].type == "info", events
    return Info.from_event(events[-1])


def error_code(event: Event | None) -> str | None:
    assert event is not None and event.type == "error", event
    return Error.from_event(event).code


def test_an_address_off_loopback_needs_allow_remote_and_is_logged(cluster: Cluster) -> None:
    refused = cluster.cli("wyoming", "--uri", f"tcp://0.0.0.0:{free_port()}")
    assert refused.returncode == 2
    assert "no authentication" in refused.stderr and "--allow-remote" in refused.stderr
    with wyoming(cluster, "--allow-remote", host="0.0.0.0") as door:
        assert described(door.client()).asr == []  # nothing served, nothing offered
    assert "EXPOSED" in door.log.read_text()


def test_hostile_events_are_answered_or_closed_and_others_go_on(cluster: Cluster) -> None:
    flags = ("--max-audio-seconds", "1", "--max-chunk-kb", "64")
    with wyoming(cluster, *flags) as door:

        async def scenario() -> None:
            async with door.client() as steady:  # open through it all, answered after it
                await steady.write_event(Describe().event())
                first = await steady.read_event()
                assert first is not None and first.type == "info"
                await asyncio.to_thread(hostile, door)
                await steady.write_event(Describe().event())
                after = await steady.read_event()
                assert after is not None and after.type == "info"

        asyncio.run(scenario())


def hostile(door: WyomingDoor) -> None:
    huge = json.dumps({"type": "audio-chunk", "payload_length": 10**12}).encode() + b"\n"
    answered = raw(door, huge)
    assert error_code(answered[0]) == "audio_too_large" and answered[1:] == [None]
    answered = raw(door, b'{"type": "describe", oops\n')
    assert error_code(answered[0]) == "invalid_input" and answered[1:] == [None]
    answered = raw(door, b"x" * 200_000)  # a header line past its bound
    assert error_code(answered[0]) == "invalid_input" and answered[1:] == [None]
    # an unknown type, a malformed known one: answered, and the connection stays open
    events = run(
        door.client(),
        [
            Event("frobnicate"),
            Event("audio-start", {"rate": "fast"}),
            Event("synthesize", {"text": 5}),
            Event("synthesize", {"text": "Hi.", "voice": {"name": ["x"]}}),
            Event("transcribe", {"language": {"en": 1}}),
            Event("synthesize-chunk", {"text": "Hello."}),  # no stream started
            Event("select-program", {"name": "someone-else"}),
            Event("select-program", {"name": "mcp-media"}),  # ours: taken without a word
            Describe().event(),
        ],
        ["info"],
        errors=False,
    )
    assert [error_code(e) for e in events[:-1]] == ["invalid_input"] * 6 + ["unsupported"]
    assert events[-1].type == "info"
    # two seconds of audio past the one-second bound: refused once, the rest dropped
    second = bytes(32_000)
    events = run(
        door.client(),
        [
            AudioStart(16_000, 2, 1).event(),
            *(AudioChunk(16_000, 2, 1, second).event() for _ in range(2)),
            AudioStop().event(),
            Describe().event(),
        ],
        ["info"],
        errors=False,
    )
    assert [e.type for e in events] == ["error", "info"]
    assert error_code(events[0]) == "audio_too_long"


def test_connections_are_counted_and_idle_ones_closed(cluster: Cluster) -> None:
    with wyoming(cluster, "--max-connections", "2", "--idle-timeout", "1") as door:
        described(door.client())  # after the start's probe connection has gone

        async def scenario() -> None:
            async with door.client() as one, door.client() as two:
                for client in (one, two):
                    await client.write_event(Describe().event())
                    answer = await client.read_event()
                    assert answer is not None and answer.type == "info"
                async with door.client() as third:
                    told = await third.read_event()
                    assert error_code(told) == "unavailable"
                    assert await third.read_event() is None
                # silent past the idle bound: told, then closed
                assert error_code(await one.read_event()) == "timeout"
                assert await one.read_event() is None

        asyncio.run(scenario())
        # the slots are free again
        assert described(door.client()).tts == []


def test_a_unix_socket_is_its_owner_s_only_and_stdio_answers(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "wyoming.sock"
    proc = subprocess.Popen(
        wyoming_command("--uri", f"unix://{path}"),
        cwd=ROOT,
        env=cluster.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while not path.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert described(AsyncUnixClient(str(path))).asr == []
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        if proc.stderr is not None:
            proc.stderr.close()
    assert not path.exists()

    stdio = subprocess.Popen(
        wyoming_command("--uri", "stdio://"),
        cwd=ROOT,
        env=cluster.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert stdio.stdin is not None and stdio.stdout is not None
    write_event(Describe().event(), cast(BinaryIO, stdio.stdin))
    stdio.stdin.flush()
    answer = read_event(cast(BinaryIO, stdio.stdout))
    assert answer is not None and answer.type == "info"
    stdio.stdin.close()
    assert stdio.wait(timeout=30) == 0
    stdio.stdout.close()
