"""Own tools' jobs as MCP tasks (io.modelcontextprotocol/tasks, 2026-07-28): a client written
to the spec (raw JSON-RPC over stdio) against a real `mcp-media mcp` on the queues, a real
vision worker and the fake vision provider."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.integration.conftest import ROOT, Cluster
from tests.support.factories import noisy_png
from tests.support.sdk_tasks import TasksExtension
from tests.support.task_client import RawClient, own_tools

pytestmark = pytest.mark.integration

JOB = "mcp-media/job"
UPSTREAM = [sys.executable, "-m", "tests.support.mcp_upstream"]


def _image(tmp_path: Path, seed: int) -> str:
    path = tmp_path / f"picture-{seed}.png"
    path.write_bytes(noisy_png(seed))
    return str(path)


def _job_result(client: RawClient, job_id: str) -> dict[str, Any]:
    """media_result of the job, asked (without the extension) until it is finished."""
    for _ in range(600):
        got = client.call("media_result", {"id": job_id}, tasks=False)
        if got["structuredContent"]["status"] != "pending":
            result: dict[str, Any] = got["structuredContent"]["result"]
            return result
        client.poll_pause()
    raise AssertionError(f"job {job_id} never finished")


def test_a_task_aware_client_gets_a_task_and_its_result_others_the_answer_as_before(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.start_worker("vision", concurrency=1)
    client = own_tools(cluster, tmp_path)
    try:
        plain = client.call("describe_image", {"image": _image(tmp_path, 1)}, tasks=False)
        assert plain["resultType"] == "complete" and "taskId" not in plain
        assert plain["structuredContent"]["status"] == "done"
        assert "A test image." in plain["content"][0]["text"]

        created = client.call("describe_image", {"image": _image(tmp_path, 2)})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert len(created["taskId"]) >= 32 and created["ttlMs"] > 0
        assert created["pollIntervalMs"] > 0
        final = client.poll(created["taskId"], timeout=120)[-1]
        assert final["resultType"] == "complete" and final["status"] == "completed"
        result = final["result"]
        assert result["structuredContent"]["status"] == "done"
        assert result["structuredContent"]["id"] == final["_meta"][JOB]
        assert "A test image." in result["content"][0]["text"]

        # A tool that runs no job answers at once, extension or not.
        status = client.call("media_status", {})
        assert status["resultType"] == "complete" and "queues" in status["structuredContent"]
        # The server says it speaks the extension.
        found = client.result("server/discover", {})
        assert "io.modelcontextprotocol/tasks" in found["capabilities"]["extensions"]
    finally:
        client.close()


def test_tasks_cancel_stops_the_job_and_the_worker_serves_on(
    cluster: Cluster, tmp_path: Path
) -> None:
    # One job at a time; the first image's description takes 8 s.
    cluster.fake.set(mode="slow", delay=8.0, only_width=64)
    cluster.start_worker("vision", concurrency=1, MCP_MEDIA_VISION__TIMEOUT="60")
    client = own_tools(cluster, tmp_path)
    try:
        slow = tmp_path / "slow.png"
        slow.write_bytes(noisy_png(10, size=(64, 48)))
        first = client.call("describe_image", {"image": str(slow)})
        client.poll(first["taskId"], timeout=60, until=_has_job)  # queued first
        second = client.call("describe_image", {"image": _image(tmp_path, 11)})
        queued = client.poll(second["taskId"], timeout=60, until=_has_job)[-1]
        assert queued["status"] == "working"
        ack = client.result("tasks/cancel", {"taskId": second["taskId"]})
        assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
        cancelled = client.result("tasks/get", {"taskId": second["taskId"]})
        assert cancelled["status"] == "cancelled"
        assert "result" not in cancelled

        # The job itself ends cancelled, without ever reaching the vision model...
        ended = _job_result(client, queued["_meta"][JOB])
        assert ended["status"] == "failed"
        assert ended["meta"]["reason"].startswith("cancelled")
        assert [r.image_width for r in cluster.fake.received] == [64]
        # ... while the first task ends as it would have, and the worker takes new work.
        assert client.poll(first["taskId"], timeout=120)[-1]["status"] == "completed"
        _serves_on(client, tmp_path, 12)
    finally:
        client.close()


def test_tasks_cancel_stops_a_description_waiting_on_the_provider(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Running jobs stop waiting when cancelled: one whose request the provider holds, one
    waiting for the only provider slot. Each ends `failed` with `cancelled` (saying where it
    stopped) while the request is still held, and the worker takes the next job."""
    cluster.fake.set(mode="slow", delay=600.0, only_width=64)  # held until the fake stops
    cluster.start_worker(
        "vision",
        concurrency=2,
        MCP_MEDIA_VISION__TIMEOUT="900",
        MCP_MEDIA_VISION__MAX_CONCURRENCY="1",
    )
    client = own_tools(cluster, tmp_path)
    try:
        tasks = []
        for seed in (30, 31):
            held = tmp_path / f"held-{seed}.png"
            held.write_bytes(noisy_png(seed, size=(64, 48)))
            task = client.call("describe_image", {"image": str(held)})
            job = client.poll(task["taskId"], timeout=60, until=_has_job)[-1]["_meta"][JOB]
            for _ in range(600):  # the first holds the provider's one slot
                if cluster.fake.stats()["in_flight"] == 1:
                    break
                client.poll_pause()
            tasks.append((task["taskId"], job))
        assert cluster.fake.stats()["in_flight"] == 1
        for (task_id, job), where in zip(
            reversed(tasks), ("a provider slot", "the provider's answer"), strict=True
        ):
            client.result("tasks/cancel", {"taskId": task_id})
            ended = _job_result(client, job)
            assert ended["status"] == "failed"
            assert ended["meta"]["reason"].startswith("cancelled"), ended
            assert f"stopped while waiting for {where}" in ended["meta"]["reason"], ended
            assert ended.get("output", {}).get("summary") is None  # no partial success
        assert cluster.fake.stats()["in_flight"] == 1  # stopped waiting, not answered
        _serves_on(client, tmp_path, 32)
    finally:
        client.close()


def _serves_on(client: RawClient, tmp_path: Path, seed: int) -> None:
    """The worker takes new work: a description as a task, completed and done."""
    task = client.call("describe_image", {"image": _image(tmp_path, seed)})
    last = client.poll(task["taskId"], timeout=120)[-1]
    assert last["status"] == "completed"
    assert last["result"]["structuredContent"]["status"] == "done"


def _has_job(task: dict[str, Any]) -> bool:
    return JOB in task.get("_meta", {})


def test_a_task_is_seen_only_by_the_session_that_made_it(cluster: Cluster, tmp_path: Path) -> None:
    cluster.fake.set(mode="slow", delay=5.0)
    cluster.start_worker("vision", concurrency=1, MCP_MEDIA_VISION__TIMEOUT="60")
    mine, other = own_tools(cluster, tmp_path), own_tools(cluster, tmp_path)
    try:
        created = mine.call("describe_image", {"image": _image(tmp_path, 20)})
        ident = {"taskId": created["taskId"]}
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            # Another session (its own connection) cannot see it, nor stop it.
            refused = other.request(method, ident)["error"]
            assert refused["code"] == -32602 and "not found" in refused["message"]
        unknown = mine.request("tasks/get", {"taskId": "x" * 32})["error"]
        assert unknown == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
        missing = mine.request("tasks/get", {}, tasks=True)["error"]
        assert missing["code"] == -32602
        # A request that does not name the extension gets the error the spec asks for.
        undeclared = mine.request("tasks/get", ident, tasks=False)["error"]
        assert undeclared["code"] == -32021
        assert undeclared["data"] == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }
        assert mine.poll(created["taskId"], timeout=120)[-1]["status"] == "completed"
    finally:
        mine.close()
        other.close()


def test_the_task_table_is_bounded(cluster: Cluster, tmp_path: Path) -> None:
    cluster.fake.set(mode="slow", delay=20.0)
    cluster.start_worker("vision", concurrency=1, MCP_MEDIA_VISION__TIMEOUT="60")
    client = own_tools(cluster, tmp_path, MCP_MEDIA_MCP__MAX_TASKS="2")
    try:
        first = client.call("describe_image", {"image": _image(tmp_path, 30)})
        client.call("describe_image", {"image": _image(tmp_path, 31)})
        full = client.request(
            "tools/call", {"name": "describe_image", "arguments": {"image": _image(tmp_path, 32)}}
        )["error"]
        assert full["code"] == -32603
        assert "too many tasks running (2, MCP_MEDIA_MCP__MAX_TASKS)" in full["message"]
        # A finished (here cancelled) task gives way to a new one.
        client.result("tasks/cancel", {"taskId": first["taskId"]})
        again = client.call("describe_image", {"image": _image(tmp_path, 32)})
        assert again["resultType"] == "task"
        gone = client.request("tasks/get", {"taskId": first["taskId"]})["error"]
        assert gone["code"] == -32602
    finally:
        client.close()


def test_a_job_no_worker_serves_is_said_at_once_and_its_task_ends_while_it_can_be_read(
    cluster: Cluster, tmp_path: Path
) -> None:
    """No worker serves the vision queue: a plain call says so at once (the job stays
    queued) instead of waiting out its wait (here 600 s, which the test's own timeout cuts);
    a task says so in its status and ends `failed` half its TTL in, while `tasks/get` still
    finds it (it used to end `completed` with a pending result at the moment it expired).
    The job stays queued: a worker started later does it."""
    client = own_tools(cluster, tmp_path, MCP_MEDIA_MCP__TASK_TTL="20")
    try:
        plain = client.call(
            "describe_image", {"image": _image(tmp_path, 40), "wait": 600}, tasks=False
        )
        assert plain["isError"] is False and plain["structuredContent"]["status"] == "pending"
        said = plain["content"][0]["text"]
        assert "no worker serves the 'vision' queue" in said and "stays queued" in said
        assert "mcp-media worker --queues vision" in said and "media_result" in said
        assert plain["structuredContent"]["reason"] in said

        created = client.call("describe_image", {"image": _image(tmp_path, 41)})
        queued = client.poll(created["taskId"], timeout=60, until=_has_job)[-1]
        assert "no worker serves the 'vision' queue yet" in queued["statusMessage"]
        final = client.poll(created["taskId"], timeout=60)[-1]
        assert final["status"] == "failed" and "result" not in final
        assert final["error"]["code"] == -32001
        assert "not finished within the task's 10 s" in final["error"]["message"]
        assert client.result("tasks/get", {"taskId": created["taskId"]})["status"] == "failed"

        cluster.start_worker("vision", concurrency=1)
        done = _job_result(client, final["_meta"][JOB])
        # The summary is said once, in the text (not again in structuredContent).
        assert done["status"] == "done" and "summary" not in done["output"]
        got = client.call("media_result", {"id": final["_meta"][JOB]}, tasks=False)
        assert "A test image." in got["content"][0]["text"]
    finally:
        client.close()


def test_the_sdk_client_with_the_tasks_extension_through_the_proxy(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The real SDK `Client`, taught the extension (tests/support/sdk_tasks.py), in front of
    `mcp-media proxy` with an upstream: own tools' calls become tasks it resolves through
    tasks/get; the upstream's tools answer as before."""
    cluster.start_worker("vision", concurrency=1)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", "--allow-root", str(tmp_path), "--", *UPSTREAM],
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )
    tasks = TasksExtension()

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=120, extensions=[tasks]) as client:
            described = await client.call_tool("describe_image", {"image": _image(tmp_path, 40)})
            assert described.structured_content is not None
            assert described.structured_content["status"] == "done"
            assert "A test image." in described.content[0].text  # type: ignore[union-attr]
            slow = await client.call_tool("slow", {"steps": 2})
            assert [b.text for b in slow.content] == ["done after 2 steps"]  # type: ignore[union-attr]

    anyio.run(scenario)
    assert tasks.created and tasks.created[0].status == "working"  # describe_image's
    assert {s.task_id for s in tasks.seen if s.status == "completed"} == {
        t.task_id for t in tasks.created
    }


def test_tasks_cancel_in_the_door_process(cluster: Cluster, tmp_path: Path) -> None:
    """`--inline`: jobs run in the door's own small pool; a job waiting there for a slot is
    cancelled before it runs."""
    cluster.fake.set(mode="slow", delay=6.0, only_width=64)
    client = own_tools(cluster, tmp_path, "--inline", MCP_MEDIA_VISION__TIMEOUT="60")
    try:
        busy = []
        for seed in (50, 51):  # both slots of the pool busy
            path = tmp_path / f"slow-{seed}.png"
            path.write_bytes(noisy_png(seed, size=(64, 48)))
            busy.append(client.call("describe_image", {"image": str(path)}))
            client.poll(busy[-1]["taskId"], timeout=60, until=_has_job)
        waiting = client.call("describe_image", {"image": _image(tmp_path, 52)})
        job = client.poll(waiting["taskId"], timeout=60, until=_has_job)[-1]["_meta"][JOB]
        client.result("tasks/cancel", {"taskId": waiting["taskId"]})
        ended = _job_result(client, job)
        assert ended["status"] == "failed" and ended["meta"]["reason"].startswith("cancelled")
        assert [r.image_width for r in cluster.fake.received] == [64, 64]
        for task in busy:
            assert client.poll(task["taskId"], timeout=120)[-1]["status"] == "completed"
    finally:
        client.close()


def test_upstream_calls_become_tasks_when_they_take_long(cluster: Cluster, tmp_path: Path) -> None:
    """Through `mcp-media proxy`: an upstream call that ends within the grace answers as
    before; a longer one becomes a task with its result through tasks/get; tasks/cancel
    cancels the upstream's call."""
    client = RawClient.start(
        [sys.executable, "-m", "workers.cli.main", "proxy", "--", *UPSTREAM],
        cluster.env(PYTHONPATH=str(ROOT)),
        ROOT,
        cluster.home / "logs" / "proxy.log",
    )
    try:
        client.result("tools/list", {})  # the upstream started
        # A call that ends within the grace answers as before (on a busy machine it may
        # become a task: either way the same answer reaches the client).
        quick = _answer(client, client.call("who", {}))
        assert quick["content"][0]["text"]
        slow = client.call("slow", {"steps": 60})  # about 3 s
        assert slow["resultType"] == "task"
        final = client.poll(slow["taskId"], timeout=120)[-1]
        assert final["status"] == "completed"
        assert final["result"]["content"] == [{"type": "text", "text": "done after 60 steps"}]

        marker = tmp_path / "cancelled"
        hanging = client.call("hang_until_cancelled", {"marker": str(marker)})
        assert hanging["resultType"] == "task"
        client.result("tasks/cancel", {"taskId": hanging["taskId"]})
        assert client.result("tasks/get", {"taskId": hanging["taskId"]})["status"] == "cancelled"
        for _ in range(300):  # the upstream hears of it
            if marker.exists():
                break
            client.poll_pause()
        assert marker.read_text() == "cancelled"

    finally:
        client.close()


def _answer(client: RawClient, called: dict[str, Any]) -> dict[str, Any]:
    """The call's result: as it came, or through tasks/get when it came as a task."""
    if called["resultType"] != "task":
        return called
    final = client.poll(called["taskId"], timeout=120)[-1]
    assert final["status"] == "completed", final
    result: dict[str, Any] = final["result"]
    return result


def test_results_held_by_tasks_are_bounded(cluster: Cluster, tmp_path: Path) -> None:
    """Past MCP_MEDIA_MCP__TASK_RESULTS_MB of results (here about 500 bytes: less than one),
    the oldest finished tasks go; the newest result is kept."""
    client = own_tools(cluster, tmp_path, "--inline", MCP_MEDIA_MCP__TASK_RESULTS_MB="0.0005")
    try:
        first = client.call("describe_image", {"image": _image(tmp_path, 60)})
        assert client.poll(first["taskId"], timeout=60)[-1]["status"] == "completed"
        second = client.call("describe_image", {"image": _image(tmp_path, 61)})
        final = client.poll(second["taskId"], timeout=60)[-1]
        assert "A test image." in final["result"]["content"][0]["text"]
        gone = client.request("tasks/get", {"taskId": first["taskId"]})["error"]
        assert gone["code"] == -32602
    finally:
        client.close()
