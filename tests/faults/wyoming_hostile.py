"""Hostile load on the Wyoming door: figures, not assertions (part of `make hostile`).

    python -m tests.faults.wyoming_hostile [--count 2000] [--concurrency 16]

Starts `mcp-media wyoming --inline` on a fresh home (no broker: these events never reach a
job) with a one-second audio bound, then sends `--count` connections of each kind on raw
sockets: an oversized `payload_length`, a header that is not JSON, a 200 kB line with no
newline, an unknown event type, audio past its bound (the other kinds at most half the
connection bound at once, so each meets its own handling), and a flood of connections past
`--max-connections`. For each kind: the answers by error code (or how the connection
ended), connections/s, the slowest connection's time to its answer or its close (each is
given ANSWER_WITHIN; past it, it counts as `lost:TimeoutError`), and the door's RSS before
and after with its peak (VmHWM); at the end, whether `describe` is still answered. Exits 2
if the door died. `tests.faults.hostile` runs `measure` after the HTTP doors' kinds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.faults import door_report
from tests.faults.door_report import memory
from tests.support.cluster import ROOT
from tests.support.net import free_port, wait_for_port
from tests.support.wyoming_door import wyoming_command


def frame(kind: str, data: Mapping[str, object] | None = None, payload: bytes = b"") -> bytes:
    header: dict[str, object] = {"type": kind}
    body = json.dumps(data).encode() if data else b""
    if body:
        header["data_length"] = len(body)
    if payload:
        header["payload_length"] = len(payload)
    return json.dumps(header).encode() + b"\n" + body + payload


SECOND = bytes(32_000)  # one second of 16 kHz 16-bit mono
FORMAT = {"rate": 16_000, "width": 2, "channels": 1}
KINDS: dict[str, Callable[[], bytes]] = {
    "huge_payload": lambda: b'{"type": "audio-chunk", "payload_length": 1000000000000}\n',
    "bad_json": lambda: b'{"type": "describe", oops\n',
    "long_line": lambda: b"x" * 200_000,
    "unknown_type": lambda: frame("frobnicate"),
    "audio_over": lambda: (
        frame("audio-start", FORMAT)
        + frame("audio-chunk", FORMAT, SECOND) * 2
        + frame("audio-stop")
    ),
}


ANSWER_WITHIN = 30.0  # far past any of the door's bounds: an answer this late shows as lost


async def one(port: int, data: bytes, hold: float = 0.0) -> str:
    """Send `data`, read the first answer's error code (or how the connection ended)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"connect:{type(exc).__name__}"
    try:
        writer.write(data)
        await writer.drain()
        await asyncio.sleep(hold)
        line = await asyncio.wait_for(reader.readline(), ANSWER_WITHIN)
        if not line:
            return "closed"
        header = json.loads(line)
        body = await reader.readexactly(header.get("data_length", 0))
        answer = {**header.get("data", {}), **(json.loads(body) if body else {})}
        return f"{header['type']}:{answer.get('code', '')}"
    except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
        return f"lost:{type(exc).__name__}"
    finally:
        writer.close()


async def burst(
    port: int, count: int, concurrency: int, data: bytes, hold: float
) -> tuple[Counter[str], float]:
    """The answers by kind, and the slowest connection's seconds to its answer or close."""
    gate = asyncio.Semaphore(concurrency)
    slowest = [0.0]

    async def guarded() -> str:
        async with gate:
            started = time.perf_counter()
            said = await one(port, data, hold)
            slowest[0] = max(slowest[0], time.perf_counter() - started - hold)
            return said

    answers = Counter(await asyncio.gather(*(guarded() for _ in range(count))))
    return answers, slowest[0]


MAX_CONNECTIONS = 8
FLAGS = ("--inline", "--max-audio-seconds", "1", "--max-connections", str(MAX_CONNECTIONS))


def measure(count: int, concurrency: int, home: Path) -> dict[str, object]:
    """Every kind on a fresh `mcp-media wyoming --inline` in `home`: figures by kind, the
    door's memory at the start and the end, and `describe` afterwards."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env["MCP_MEDIA_HOME"] = str(home)
    log = home / "logs" / "wyoming.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            wyoming_command("--uri", f"tcp://127.0.0.1:{port}", *FLAGS),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, log)
        kinds = {name: (make(), 0.0) for name, make in KINDS.items()}
        # Each held a moment, four times the door's bound at once.
        kinds["connection_flood"] = (frame("describe"), 0.2)
        report: dict[str, object] = {"count": count, "memory_start": memory(proc)}
        figures: dict[str, object] = {}
        for name, (data, hold) in kinds.items():
            before = memory(proc)
            started = time.perf_counter()
            # The other kinds stay under the bound (a closed connection is counted by the door
            # a moment after the client sees it closed), so each meets its own handling.
            lanes = min(concurrency, MAX_CONNECTIONS // 2)
            if name == "connection_flood":
                lanes = 4 * MAX_CONNECTIONS
            answers, slowest = asyncio.run(burst(port, count, lanes, data, hold))
            figures[name] = door_report.figures(
                "connections", count, started, answers, slowest, before, memory(proc)
            )
        report["kinds"] = figures
        report["describe_after"] = asyncio.run(one(port, frame("describe")))
        report["memory_end"] = memory(proc)
        return report
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def lines(report: dict[str, object]) -> list[str]:
    return door_report.lines("wyoming", 17, report, "describe_after", "describe")


def main() -> int:
    return door_report.main("wyoming", measure, lines, "describe_after", "info:")


if __name__ == "__main__":
    sys.exit(main())
