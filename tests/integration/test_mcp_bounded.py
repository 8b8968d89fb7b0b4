"""The MCP door against hostile upstreams and clients: every request id answered, upstream
reads linear and capped, invalid client ids refused. A real `mcp-media proxy` process, the
real SDK client, and a hand-written JSON-RPC upstream (tests.support.raw_upstream) that
sends what no SDK server would."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_mcp_http import INITIALIZE
from tests.integration.test_mcp_proxy import proxied, run, texts

pytestmark = pytest.mark.integration

BOUND = 600  # seconds: a hang fails the test, nothing is timed


def raw(markers: Path) -> list[str]:
    return ["--", sys.executable, "-m", "tests.support.raw_upstream", str(markers)]


async def wait_for(path: Path) -> None:
    with anyio.fail_after(BOUND):
        while not path.exists():
            await anyio.sleep(0.05)


async def refused(client: Client, tool: str, **arguments: Any) -> MCPError:
    with pytest.raises(MCPError) as caught, anyio.fail_after(BOUND):
        await client.call_tool(tool, arguments)
    return caught.value


def test_an_80_mb_result_comes_through_while_the_door_serves_other_calls(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Reading the upstream is linear: 80 MB of base64 took 143 s through the SDK's reader
    (it re-split its whole buffer per read), about 1 s here; 30 s only bounds a hang."""
    order: list[str] = []

    async def scenario() -> None:
        blobs = str(80 * 1024 * 1024)  # the blob is cached, then linked
        async with proxied(
            cluster, "--inline", *raw(tmp_path), MCP_MEDIA_MAX_BLOB_BYTES=blobs
        ) as client:
            await client.list_tools()

            async def big() -> None:
                result = await client.call_tool("big", {"megabytes": 60})
                assert [block.type for block in result.content] == ["resource_link", "text"]
                order.append("big")

            async def status() -> None:
                await wait_for(tmp_path / "big-started")
                await client.call_tool("media_status", {})
                order.append("status")

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(big)
                    tasks.start_soon(status)
            assert texts(await client.call_tool("who", {})) == ["raw"]

    run(scenario)
    # While the 80 MB line was read and rewritten, an own tool was answered.
    assert order == ["status", "big"]


def test_a_message_over_the_cap_is_discarded_and_its_call_gets_an_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with proxied(
            cluster, "--inline", *raw(tmp_path), MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB="1"
        ) as client:
            error = await refused(client, "big", megabytes=3)
            assert "over the cap of 1048576" in error.error.message
            assert "MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB" in error.error.message
            assert texts(await client.call_tool("who", {})) == ["raw"]

    run(scenario)


def test_an_answer_nested_too_deep_to_parse_settles_its_call(
    cluster: Cluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with proxied(cluster, "--inline", *raw(tmp_path)) as client:
            # Its id read from the line's head.
            error = await refused(client, "deep", depth=100_000)
            assert "cannot be read" in error.error.message
            # Its id past any bounded scan: the only call in flight is the one it answers.
            error = await refused(client, "deep_id_last", depth=100_000)
            assert "cannot be read" in error.error.message
            assert texts(await client.call_tool("who", {})) == ["raw"]

    run(scenario)


def test_a_silent_upstream_times_out_and_is_cancelled_while_progress_extends_a_call(
    cluster: Cluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with proxied(
            cluster, "--inline", *raw(tmp_path), MCP_MEDIA_MCP__CALL_TIMEOUT="5"
        ) as client:
            error = await refused(client, "silent")
            assert error.error.code == types.REQUEST_TIMEOUT
            assert "MCP_MEDIA_MCP__CALL_TIMEOUT" in error.error.message
            with anyio.fail_after(BOUND):
                while not list(tmp_path.glob("cancelled-*")):
                    await anyio.sleep(0.05)  # the upstream was told to stop
            # Eight seconds of work, a progress notification each second: answered.
            with anyio.fail_after(BOUND):
                slow = await client.call_tool("slow", {"steps": 8}, progress_callback=_ignore)
            assert texts(slow) == ["done"]

    run(scenario)


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    return None


INVALID_IDS = ['{"a":1}', "1e999", "[1]", "true", "1.5"]


async def _exchange(process: Process, line: str) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    await process.stdin.send(line.encode() + b"\n")
    buffer = b""
    with anyio.fail_after(BOUND):
        while b"\n" not in buffer:
            buffer += await process.stdout.receive()
    answer: dict[str, Any] = json.loads(buffer.split(b"\n", 1)[0])
    return answer


def test_invalid_ids_and_unparsable_lines_over_stdio_get_errors(cluster: Cluster) -> None:
    async def scenario() -> None:
        command = [sys.executable, "-m", "workers.cli.main", "mcp", "--inline"]
        async with await anyio.open_process(
            command, env=cluster.env(PYTHONPATH=str(ROOT)), cwd=ROOT, stderr=sys.stderr
        ) as process:
            assert (await _exchange(process, json.dumps(INITIALIZE)))["id"] == 1
            for bad in INVALID_IDS:
                line = f'{{"jsonrpc":"2.0","id":{bad},"method":"tools/list"}}'
                answer = await _exchange(process, line)
                assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST
            for version in ('"jsonrpc":"1.0",', ""):  # one line, not the SDK's pydantic dump
                answer = await _exchange(process, f'{{{version}"id":4,"method":"tools/list"}}')
                assert answer["error"]["message"] == 'Invalid Request: "jsonrpc" must be "2.0"'
            answer = await _exchange(process, '{"jsonrpc": "2.0", "id": 2, "method"')
            assert answer["id"] is None and answer["error"]["code"] == types.PARSE_ERROR
            listed = '{"jsonrpc":"2.0","id":3,"method":"tools/list"}'
            assert (await _exchange(process, listed))["id"] == 3
            assert process.stdin is not None
            await process.stdin.aclose()

    run(scenario)
