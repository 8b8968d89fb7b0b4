"""What the MCP proxy adds to a call over stdio, alternating with direct calls.

One real MCP client talks to the bench upstream (`bench.mcp_upstream`) directly and another
to the same upstream through `mcp-media proxy --inline`; both stay open and calls alternate
one by one (the first of each pair alternates too), so machine noise falls on both sides.
Two cases, each with a named target (issue 23 item 7):

- text: `ping`, a text-only result the proxy passes through untouched (p50 added <= 2 ms);
- image: `screenshot`, a caption and a ~20 KB PNG whose summary is already stored: the proxy
  caches the blob, finds the summary and rewrites the result (p50 added <= 5 ms).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pybase64
from mcp import Client, StdioServerParameters

from bench.mcp_upstream import SCREENSHOT
from bench.results import record
from pipelines.media import Capability
from pipelines.results import Envelope, Status
from workers.core.settings import Settings
from workers.gateways.inline import InlineGateway

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = [sys.executable, "-m", "bench.mcp_upstream"]
CALLS = 600  # pairs of calls per case
WARMUP = 20
SUMMARY = "A terminal showing a build log: ten builds, every one passed."


@dataclass(frozen=True, slots=True)
class Case:
    name: str  # the entry names: mcp_proxy[_<name>]_added_p<q>_ms
    tool: str
    target_p50_ms: float
    what: str


CASES = (
    Case("", "ping", 2.0, "a text-only result"),
    Case("image", "screenshot", 5.0, "a ~20 KB PNG whose summary is stored"),
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    return {**env, "MCP_MEDIA_HOME": str(home)}


def store_summary(home: Path) -> str:
    """Store a finished summary of the bench screenshot, as an earlier call would have."""
    settings = Settings.from_env(_env(home))
    gateway = InlineGateway(settings)
    sha256 = hashlib.sha256(pybase64.b64decode(SCREENSHOT)).hexdigest()
    key = gateway.key(Capability.VISION_SUMMARIZE, sha256)
    gateway.resources.state.results.put(
        Envelope(Status.DONE, key, {"summary": SUMMARY}, job_id="bench-stored")
    )
    gateway.close()
    return sha256


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _alternate(
    direct: StdioServerParameters, proxied: StdioServerParameters, case: Case
) -> tuple[list[float], list[float]]:
    async with Client(direct) as plain, Client(proxied) as through:
        for _ in range(WARMUP):  # warm up both processes (and the proxy's caches)
            await plain.call_tool(case.tool, {})
            seen = await through.call_tool(case.tool, {})
        if case.tool == "screenshot" and SUMMARY not in _text(seen):
            raise RuntimeError(f"the stored summary is not in the proxied result: {seen}")
        times: dict[bool, list[float]] = {False: [], True: []}
        for index in range(CALLS):
            for proxy in (False, True) if index % 2 else (True, False):
                client = through if proxy else plain
                start = time.perf_counter()
                await client.call_tool(case.tool, {})
                times[proxy].append(time.perf_counter() - start)
        return times[False], times[True]


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1]


def overhead(home: Path) -> None:
    """Both cases, alternating with direct calls; p50 (with a target) and p99 added."""
    env = _env(home)
    store_summary(home)
    direct = StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:], env=env, cwd=str(ROOT))
    proxied = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", "--inline", "--", *UPSTREAM],
        env=env,
        cwd=str(ROOT),
    )
    for case in CASES:
        plain, through = anyio.run(_alternate, direct, proxied, case)
        prefix = f"mcp_proxy_{case.name}_" if case.name else "mcp_proxy_"
        for q in (50, 99):
            base, value = _p(plain, q) * 1000, _p(through, q) * 1000
            record(
                f"{prefix}added_p{q}_ms",
                {
                    "value": value - base,
                    "unit": "ms",
                    "baseline": base,
                    "baseline_of": f"p{q} of the same client calling the server directly for "
                    f"{case.what}, alternating call by call, same run",
                    "ratio": value / base,
                    "target": f"value <= {case.target_p50_ms:g}" if q == 50 else "report",
                    "better": "lower",
                },
            )
