"""`mcp-media intercept`, the Docker MCP gateway's after:exec hook, as a real process: the
tool result on stdin, the rewritten one on stdout, with a broker and without one."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.integration.conftest import ROOT, Cluster
from tests.support.factories import image_block, png_bytes, result

pytestmark = pytest.mark.integration


def intercept(cluster: Cluster, payload: bytes, *args: str, **env: str) -> tuple[Any, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "intercept", *args],
        input=payload,
        capture_output=True,
        cwd=ROOT,
        env=cluster.env(**env),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.decode()


def wrapped_image_result() -> bytes:
    tool = result({"type": "text", "text": "chart"}, image_block(png_bytes()), isError=False)
    return json.dumps({"jsonrpc": "2.0", "id": 9, "result": tool}).encode()


def test_with_workers_the_summary_arrives_in_the_rewritten_result(cluster: Cluster) -> None:
    cluster.fake.set(reply="A bar chart with two bars.")
    cluster.start_worker("vision", concurrency=2)
    out, _ = intercept(cluster, wrapped_image_result(), "--images", "text")
    assert out["jsonrpc"] == "2.0" and out["id"] == 9
    content = out["result"]["content"]
    assert [b["type"] for b in content] == ["text", "text"]
    assert content[1]["text"].startswith("\nMEDIA:")  # our block: on lines of its own
    assert "A bar chart with two bars." in content[1]["text"]
    assert out["result"]["isError"] is False
    assert cluster.fake.request_count == 1


def test_without_a_broker_jobs_run_inline(cluster: Cluster) -> None:
    cluster.fake.set(reply="Inline summary.")
    out, _ = intercept(cluster, wrapped_image_result(), "--inline")
    content = out["result"]["content"]
    assert [b["type"] for b in content] == ["text", "image", "text"]
    assert "Inline summary." in content[2]["text"]


def test_wait_zero_answers_at_once_and_the_result_lands_later(cluster: Cluster) -> None:
    cluster.fake.set(reply="Later summary.")
    out, _ = intercept(cluster, wrapped_image_result(), "--inline", "--wait", "0")
    note = out["result"]["content"][2]["text"]
    assert "still running" in note and "media_result" in note
    sha = note.split("MEDIA:")[1].split("\n")[0].rsplit("/", 1)[1].split(".")[0]
    shown = cluster.cli_json("result", sha)
    assert shown["result"]["output"]["summary"] == "Later summary."  # finished before exit


@pytest.mark.parametrize("payload", [b"not json at all", b'{"jsonrpc": "2.0", "id": 1}'])
def test_bad_input_is_passed_through_with_a_reason(cluster: Cluster, payload: bytes) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "intercept", "--inline"],
        input=payload,
        capture_output=True,
        cwd=ROOT,
        env=cluster.env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout == payload
    assert "passed through" in proc.stderr.decode()


def test_link_is_not_offered_where_nothing_serves_links(cluster: Cluster) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "intercept", "--images", "link"],
        input=wrapped_image_result(),
        capture_output=True,
        cwd=ROOT,
        env=cluster.env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and b"invalid choice: 'link'" in proc.stderr


def test_an_unreachable_broker_never_loses_the_tool_result(cluster: Cluster) -> None:
    from tests.support.net import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"
    payload = wrapped_image_result()
    out, stderr = intercept(cluster, payload, "--images", "text", MCP_MEDIA_REDIS_URL=dead)
    original = json.loads(payload)
    assert out["jsonrpc"] == "2.0" and out["id"] == 9
    content = out["result"]["content"]
    assert content[:-1] == original["result"]["content"]  # the image as it came, not text
    assert content[-1]["type"] == "text"
    assert "could not process this tool result" in content[-1]["text"]
    assert "ConnectionError" in content[-1]["text"]
    assert out["result"]["isError"] is False
    assert "not processed (ConnectionError" in stderr
