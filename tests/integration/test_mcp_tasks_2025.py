"""MCP tasks as the 2025-11-25 revision has them, for handshake-era clients: the real SDK
1.30 client (`session.experimental.call_tool_as_task`, in its own venv) against a real
`mcp-media proxy` over stdio and over streamable HTTP, with an own job tool
(describe_image, the fake vision provider) and an upstream that runs tools as tasks of its
own (`simulate-research-query` of the npm server-everything, passed through)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_mcp_http import mcp_door
from tests.integration.test_mcp_protocol import UPSTREAM_EVERYTHING
from tests.support.factories import noisy_png
from tests.support.venvs import venv_with

pytestmark = pytest.mark.integration

CLIENT = ROOT / "tests/support/sdk1_task_client.py"
RESEARCH = "simulate-research-query"  # server-everything's tool that runs only as a task
RELATED = "io.modelcontextprotocol/related-task"
NOT_FOUND = "Failed to retrieve task: Task not found"


@pytest.fixture(scope="module")
def sdk1_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return venv_with(tmp_path_factory.mktemp("sdk1-tasks-venv"), "mcp==1.30.0")


def _client(python: Path, cluster: Cluster, image: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python), str(CLIENT), "--image", str(image), "--upstream-tool", RESEARCH, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _image(tmp_path: Path) -> Path:
    path = tmp_path / "picture.png"
    path.write_bytes(noisy_png(7))
    return path


def _check(out: dict[str, Any]) -> None:
    assert out["protocol"] == "2025-11-25"
    assert out["capability"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert out["task_support"]["describe_image"] == "optional"
    assert out["task_support"]["media_status"] == "optional"
    assert out["task_support"][RESEARCH] == "required"  # the upstream's own word
    assert out["task_support"]["echo"] == "optional"  # "forbidden" upstream: we wrap it
    assert "A test image." in out["plain"][0]  # no task asked: the answer, as before

    created = out["created"]
    assert created["status"] == "working" and len(created["taskId"]) >= 32
    assert created["ttl"] == 120_000 and created["pollInterval"] > 0
    final = out["polled"][-1]
    assert final["status"] == "completed", final
    assert final["lastUpdatedAt"] > created["lastUpdatedAt"]  # it moved as the task did
    result = out["result"]
    assert result["structuredContent"]["status"] == "done"
    assert "A test image." in result["content"][0]["text"]
    assert result["_meta"][RELATED] == {"taskId": created["taskId"]}

    # Passed through: the upstream's task, its stages seen through our tasks/get.
    passed = out["upstream_polled"]
    assert passed[-1]["status"] == "completed", passed
    assert any("(upstream " in (s.get("statusMessage") or "") for s in passed[:-1]), passed
    working = [s for s in passed if s["status"] == "working"]
    for before, after in itertools.pairwise(working):  # each stage moves it
        if after["statusMessage"] != before["statusMessage"]:
            assert after["lastUpdatedAt"] > before["lastUpdatedAt"], (before, after)
    assert "# Research Report: tasks" in out["upstream_result"][0]
    assert out["wrapped_polled"][-1]["status"] == "completed"
    assert out["wrapped_result"] == ["Echo: hi"]
    cancelled = out["upstream_cancel"]
    assert cancelled["status"] == "cancelled"
    # the upstream answered our tasks/cancel with its task cancelled
    assert "(upstream up: cancelled)" in cancelled["statusMessage"], cancelled
    assert out["upstream_after_cancel"]["status"] == "cancelled"
    assert out["result_of_cancelled"]["message"] == "Task cancelled"
    assert out["cancel_again"]["code"] == -32602
    assert "terminal" in out["cancel_again"]["message"]

    mine = {created["taskId"], out["upstream_created"]["taskId"], cancelled["taskId"]}
    mine.add(out["wrapped"])
    assert set(out["listed"]) == mine
    assert out["unknown"] == {"code": -32602, "message": NOT_FOUND}
    assert out["bad_cursor"] == {"code": -32602, "message": "Invalid cursor 'nope'"}
    ended = {(s["taskId"], s["status"]) for s in out["status_notifications"]}
    assert (created["taskId"], "completed") in ended
    assert (cancelled["taskId"], "cancelled") in ended


def test_an_sdk_1x_client_runs_tasks_through_the_proxy_over_stdio(
    cluster: Cluster, sdk1_python: Path, tmp_path: Path
) -> None:
    proxy = [sys.executable, "-m", "workers.cli.main", "proxy", "--inline"]
    config = _config(tmp_path)
    out = _client(
        sdk1_python,
        cluster,
        _image(tmp_path),
        "--",
        *proxy,
        "--allow-root",
        str(tmp_path),
        "--config",
        str(config),
    )
    _check(out)


def test_an_sdk_1x_client_runs_tasks_through_the_proxy_over_http_one_session_each(
    cluster: Cluster, sdk1_python: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path)
    args = ("--allow-root", str(tmp_path), "--config", str(config))
    with mcp_door(cluster, "proxy", *args) as (url, token):
        out = _client(sdk1_python, cluster, _image(tmp_path), "--http", url, "--token", token)
    _check(out)
    other = out["other"]  # a second session cannot see, wait for or stop the first's task
    for method in ("get", "result", "cancel"):
        assert other[method] == {"code": -32602, "message": NOT_FOUND}, (method, other)
    assert other["listed"] == []


def _config(tmp_path: Path) -> Path:
    """server-everything as the one upstream, named `up` (its tools keep their names)."""
    config = tmp_path / "servers.json"
    command, *args = UPSTREAM_EVERYTHING
    config.write_text(json.dumps({"mcpServers": {"up": {"command": command, "args": args}}}))
    return config
