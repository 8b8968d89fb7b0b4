"""Sequential 2026-07-28 calls over HTTP, each request with upstream sessions of its own:
the median `echo` call through `mcp-media proxy --http` to server-everything (a stdio
upstream, so each request's sessions start a process), with MCP__SPARE_SESSIONS 0 against 1
(sessions started ahead), and with MCP__MODERN_SESSIONS=shared (one set for every request,
the old behaviour) for reference. Back to back, and with a pause between calls (an agent's
turn): a spare started as the previous call began is only ready if the pause covers an
upstream's start (back to back with one spare, every other call waits for one: the mean
shows it, the median may not). Run alone: `python -m bench.mcp_sessions`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.results import record
from tests.faults.hostile import door
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests/support/upstreams/node_modules/@modelcontextprotocol/server-everything"
CALLS = 11
PAUSE_S = 2.0  # between calls, in the paced run
CASES = {"0 spares": ("request", "0"), "1 spare": ("request", "1"), "shared": ("shared", "0")}


async def _calls(url: str, token: str) -> dict[str, tuple[float, float]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client,
    ):
        await client.call_tool("echo", {"message": "warm"})  # spares start at the first
        medians = {}
        for pause in (0.0, PAUSE_S):
            await anyio.sleep(3)  # a spare is ready before the first timed call
            timings = []
            for n in range(CALLS):
                start = time.perf_counter()
                await client.call_tool("echo", {"message": f"call {n}"})
                timings.append(time.perf_counter() - start)
                await anyio.sleep(pause)
            run = "paced" if pause else "back to back"
            medians[run] = (statistics.median(timings), statistics.mean(timings))
        return medians


def median_echo(home: Path, sessions: str, spares: str) -> dict[str, tuple[float, float]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env |= {
        "MCP_MEDIA_HOME": str(home),
        "MCP_MEDIA_MCP__MODERN_SESSIONS": sessions,
        "MCP_MEDIA_MCP__SPARE_SESSIONS": spares,
    }
    home.mkdir(parents=True, exist_ok=True)
    upstream = ["node", str(EVERYTHING / "dist/index.js"), "stdio"]
    argv = ["proxy", "--inline", "--http", f"127.0.0.1:{port}", "--", *upstream]
    with door("proxy", argv, port, env, home) as proxy:
        token = (home / "mcp-token").read_text().strip()
        return anyio.run(_calls, f"{proxy.url}/mcp", token)


def sessions(home: Path) -> None:
    medians = {name: median_echo(home / name, *case) for name, case in CASES.items()}
    load = os.getloadavg()[0]
    for name, runs in medians.items():
        for run, (median, mean) in runs.items():
            print(
                f"  {name}, {run}: echo median {median:.3f} s, mean {mean:.3f} s "
                f"({CALLS} calls, load {load:.1f})"
            )
    for run in ("back to back", "paced"):
        record(
            f"mcp_2026_request_echo_{run.replace(' ', '_')}_s",
            {
                "value": medians["1 spare"][run][0],
                "unit": "s",
                "baseline": medians["0 spares"][run][0],
                "baseline_of": "no spare: each request starts server-everything (stdio) itself",
                "ratio": medians["0 spares"][run][0] / medians["1 spare"][run][0],
                "target": "report",
                "better": "lower",
            },
        )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="mcp-media-bench-") as scratch:
        sessions(Path(scratch))
