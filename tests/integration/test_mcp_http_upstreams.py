"""Upstreams reached over HTTP (streamable HTTP with JSON or SSE answers, and the legacy SSE
transport) answering more than the proxy takes: a real `mcp-media proxy --http` process,
the real SDK client, and a hand-written HTTP upstream (tests.support.http_upstream) that
streams a 50 MiB answer without holding it. The answer is refused as it streams (the
proxy's peak memory stays far below it), its call gets a JSON-RPC error naming the upstream
and the cap, and the next call is served."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_mcp_http import mcp_door_process
from tests.integration.test_mcp_proxy import texts
from tests.support.net import free_port, wait_for_port

pytestmark = pytest.mark.integration

BOUND = 300  # seconds: a hang fails the test, nothing is timed
MIB = 1024 * 1024
PAYLOAD_MB = 50


@contextmanager
def http_upstream(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "http-upstream.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.http_upstream", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def proxy_of(
    cluster: Cluster, tmp_path: Path, url: str, transport: str, **env: str
) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """`mcp-media proxy --http` in front of the one upstream at `url`."""
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"far": {"url": url, "type": transport}}}))
    with mcp_door_process(cluster, "proxy", "--config", str(config), **env) as door:
        yield door


def peak_mib(proc: subprocess.Popen[bytes]) -> float:
    """The process's peak resident memory so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def calls(url: str, token: str, *steps: tuple[str, float]) -> list[list[str] | MCPError]:
    """Each (tool, megabytes) called in turn through the proxy: its texts, or its error."""
    out: list[list[str] | MCPError] = []
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=BOUND)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        for tool, megabytes in steps:
            try:
                with anyio.fail_after(BOUND):
                    result = await client.call_tool(tool, {"megabytes": megabytes})
                assert not result.is_error, texts(result)[:1]
                out.append(texts(result))
            except MCPError as exc:
                out.append(exc)
    return out


TRANSPORTS = [("json", "streamable-http"), ("sse", "streamable-http"), ("legacy", "sse")]


@pytest.mark.parametrize(("path", "transport"), TRANSPORTS)
def test_an_answer_over_the_cap_is_refused_as_it_streams_and_the_next_call_is_served(
    cluster: Cluster, tmp_path: Path, path: str, transport: str
) -> None:
    with (
        http_upstream(tmp_path) as base,
        proxy_of(
            cluster, tmp_path, f"{base}/{path}", transport,
            MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB="4",
        ) as (url, token, proc),
    ):  # fmt: skip
        before = peak_mib(proc)
        got = anyio.run(calls, url, token, ("who", 0), ("big", PAYLOAD_MB), ("who", 0))
        grown = peak_mib(proc) - before
    assert got[0] == ["http"] and got[2] == ["http"], got
    refused = got[1]
    assert isinstance(refused, MCPError), str(got[1])[:200]
    cap = MIB if transport == "sse" else 4 * MIB  # the SDK's SSE client holds at most 1 MiB
    said = refused.error.message
    assert "'far'" in said and f"over the cap of {cap} bytes" in said, said
    assert "MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB" in said, said
    assert grown < PAYLOAD_MB / 2, f"the proxy's peak grew {grown:.1f} MiB"


@pytest.mark.parametrize(("path", "transport"), TRANSPORTS[:2])
def test_an_answer_under_the_cap_comes_through_whatever_its_size(
    cluster: Cluster, tmp_path: Path, path: str, transport: str
) -> None:
    """3 MiB in one SSE event: past the SDK's own 1 MiB for an event, under the proxy's cap."""
    with (
        http_upstream(tmp_path) as base,
        proxy_of(cluster, tmp_path, f"{base}/{path}", transport) as (url, token, _),
    ):
        got = anyio.run(calls, url, token, ("big", 3), ("who", 0))
    assert got[1] == ["http"], got
    assert isinstance(got[0], list) and got[0][0] == "a" * 3 * MIB, str(got[0])[:200]
