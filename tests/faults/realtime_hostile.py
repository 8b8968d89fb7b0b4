"""Hostile load on the Realtime socket (`/v1/realtime` on serve): figures, not assertions
(part of `make hostile`).

    python -m tests.faults.realtime_hostile [--count 2000] [--concurrency 16]

Starts `mcp-media serve --inline` on a fresh home (these events never reach a job) with a
1 MiB turn buffer and 8 sessions at once, then opens `--count` sessions of each kind, each
sending one hostile event after `session.created`: text that is not JSON, a binary frame, an
event of an unknown type, an append past the buffer's bound (a tenth as many: each is 1.4 MB),
and a flood of sessions held a moment, four times the bound at once. For each kind: the
answers by `error.code` (or the refusal's HTTP status before the upgrade, or how the
connection ended), sessions/s, the slowest session's time to its answer (each is given
ANSWER_WITHIN; past it, it counts as `lost:...`), and serve's RSS before and after with its
peak (VmHWM); at the end, whether a fresh session is still opened. `tests.faults.hostile`
runs `measure` after the Wyoming door's kinds.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import websocket

from tests.faults import door_report
from tests.faults.door_report import memory
from tests.support.cluster import ROOT
from tests.support.net import free_port, wait_for_port

ANSWER_WITHIN = 30.0
SESSIONS = 8
BUFFER_MB = 1
Send = Callable[[websocket.WebSocket], object]


def _text(data: str) -> Send:
    return lambda ws: ws.send(data)


def _append(size: int) -> str:
    audio = base64.b64encode(bytes(size)).decode()
    return json.dumps({"type": "input_audio_buffer.append", "audio": audio})


KINDS: dict[str, tuple[Send, float]] = {  # what is sent, and how long the session is held
    "bad_json": (_text('{"type": "session.update", oops'), 0.0),
    "binary_frame": (lambda ws: ws.send_binary(b"\x00\x01 audio where an event belongs"), 0.0),
    "unknown_type": (_text(json.dumps({"type": "frobnicate"})), 0.0),
    "append_over": (_text(_append(int(BUFFER_MB * 1.4 * 1024 * 1024))), 0.0),
    "session_flood": (lambda ws: None, 0.2),
}


def one(url: str, key: str, send: Send, hold: float) -> str:
    """Open a session, send one hostile event, read the first answer."""
    try:
        ws = websocket.create_connection(
            url, header=[f"Authorization: Bearer {key}"], timeout=ANSWER_WITHIN
        )
    except websocket.WebSocketBadStatusException as exc:
        return f"refused:{exc.status_code}"
    except (OSError, websocket.WebSocketException) as exc:
        return f"connect:{type(exc).__name__}"
    try:
        created = json.loads(ws.recv())
        send(ws)
        time.sleep(hold)
        if hold:
            return str(created["type"])
        answer = json.loads(ws.recv())
        if answer.get("type") == "error":
            return f"error:{answer['error']['code']}"
        return str(answer.get("type"))
    except websocket.WebSocketConnectionClosedException:
        return "closed"
    except (OSError, ValueError, websocket.WebSocketException) as exc:
        return f"lost:{type(exc).__name__}"
    finally:
        ws.close()


def burst(
    url: str, key: str, count: int, lanes: int, send: Send, hold: float
) -> tuple[Counter[str], float]:
    slowest = [0.0]

    def timed(_: int) -> str:
        started = time.perf_counter()
        said = one(url, key, send, hold)
        slowest[0] = max(slowest[0], time.perf_counter() - started - hold)
        return said

    with ThreadPoolExecutor(lanes) as pool:
        answers = Counter(pool.map(timed, range(count)))
    return answers, slowest[0]


def measure(count: int, concurrency: int, home: Path) -> dict[str, object]:
    """Every kind on a fresh `mcp-media serve --inline` in `home`: figures by kind, serve's
    memory at the start and the end, and a session opened afterwards."""
    port, key = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env.update(MCP_MEDIA_HOME=str(home), MCP_MEDIA_API__KEY=key,
               MCP_MEDIA_API__REALTIME_SESSIONS=str(SESSIONS),
               MCP_MEDIA_API__REALTIME_BUFFER_MB=str(BUFFER_MB))  # fmt: skip
    log = home / "logs" / "serve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "workers.cli.main", "serve", "--inline", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out)
    url = f"ws://127.0.0.1:{port}/v1/realtime?intent=transcription"
    try:
        wait_for_port(port, proc, log)
        report: dict[str, object] = {"count": count, "memory_start": memory(proc)}
        figures: dict[str, object] = {}
        for name, (send, hold) in KINDS.items():
            before = memory(proc)
            many = max(count // 10, 1) if name == "append_over" else count
            # Under the bound but for the flood (a closed session is counted by serve a
            # moment after the client sees it closed), so each kind meets its own handling.
            lanes = 4 * SESSIONS if name == "session_flood" else min(concurrency, SESSIONS // 2)
            started = time.perf_counter()
            answers, slowest = burst(url, key, many, lanes, send, hold)
            figures[name] = door_report.figures(
                "sessions", many, started, answers, slowest, before, memory(proc)
            )
        report["kinds"] = figures
        time.sleep(1.0)  # the flood's sessions counted closed
        report["session_after"] = one(url, key, lambda ws: None, 0.01)
        report["memory_end"] = memory(proc)
        return report
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def lines(report: dict[str, object]) -> list[str]:
    return door_report.lines("realtime", 14, report, "session_after", "session")


def main() -> int:
    return door_report.main("realtime", measure, lines, "session_after", "session.created")


if __name__ == "__main__":
    sys.exit(main())
