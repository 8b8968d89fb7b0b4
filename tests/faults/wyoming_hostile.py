"""Hostile load on the Wyoming door: figures, not assertions.

    python -m tests.faults.wyoming_hostile [--count 2000] [--concurrency 16]

Starts `mcp-media wyoming --inline` on a fresh home (no broker: these events never reach a
job) with a one-second audio bound, then sends `--count` connections of each kind on raw
sockets: an oversized `payload_length`, a header that is not JSON, a 200 kB line with no
newline, an unknown event type, audio past its bound, and a flood of connections past
`--max-connections`. For each kind: the answers by error code (or how the connection
ended), connections/s, and the door's RSS before and after with its peak (VmHWM); at the
end, whether `describe` is still answered. Exits 2 if the door died.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

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
        line = await asyncio.wait_for(reader.readline(), 30)
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


def memory(proc: subprocess.Popen[bytes]) -> dict[str, float]:
    if proc.poll() is not None:
        raise SystemExit(2)
    found = {}
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = round(int(value.split()[0]) / 1024, 1)
    return found


async def burst(port: int, count: int, concurrency: int, data: bytes, hold: float) -> Counter[str]:
    gate = asyncio.Semaphore(concurrency)

    async def guarded() -> str:
        async with gate:
            return await one(port, data, hold)

    return Counter(await asyncio.gather(*(guarded() for _ in range(count))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wyoming-hostile-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env["MCP_MEDIA_HOME"] = str(home)
    log = home / "wyoming.log"
    flags = ("--inline", "--max-audio-seconds", "1", "--max-connections", "8")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            wyoming_command("--uri", f"tcp://127.0.0.1:{port}", *flags),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, log)
        kinds = {name: (make(), 0.0) for name, make in KINDS.items()}
        kinds["connection_flood"] = (frame("describe"), 0.2)  # each held a moment: 32 at once
        for name, (data, hold) in kinds.items():
            before = memory(proc)
            started = time.perf_counter()
            concurrency = 32 if name == "connection_flood" else args.concurrency
            answers = asyncio.run(burst(port, args.count, concurrency, data, hold))
            rate = args.count / (time.perf_counter() - started)
            after = memory(proc)
            print(
                f"{name:17} {dict(answers)}  {rate:.0f}/s  RSS {before['VmRSS']} -> "
                f"{after['VmRSS']} MiB (peak {after['VmHWM']})"
            )
        still = asyncio.run(one(port, frame("describe")))
        print(f"describe afterwards: {still}")
        return 0 if still == "info:" else 2
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
