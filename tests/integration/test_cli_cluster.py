"""The CLI against the cluster: status from the workers' announcements, `--wait` when no
worker serves a queue, and the embedded broker a command starts and `down` stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from tests.integration.conftest import ROOT, Cluster, write_result
from tests.integration.test_vision_jobs import image_result, noisy_png
from tests.support.factories import audio_block, image_block, wav_bytes
from tests.support.fake_openai import Mode
from workers.broker.embedded import running_embedded, stop_embedded
from workers.core import keys

pytestmark = pytest.mark.integration


def test_status_reads_the_workers_announcements(cluster: Cluster, tmp_path: Path) -> None:
    cluster.fake.set(mode=Mode.SLOW, delay=20.0)
    worker = cluster.start_worker("vision", concurrency=2, MCP_MEDIA_VISION__TIMEOUT="40")
    # "ready." is logged after the first announcement: status knows the worker at once.
    idle = cluster.cli_json("status")
    (row,) = idle["workers"]
    assert row["name"].startswith("vision-") and row["queues"] == ["vision"]
    assert (row["pool"], row["concurrency"], row["threads"]) == ("threads", 2, 1)
    assert row["pid"] == worker.proc.pid
    assert row["active"] == 0 and row["rss_mib"] > 0
    assert row["started_at"] <= row["seen"] and row["age_s"] >= 0
    assert idle["queues"]["vision"] == {"waiting": 0, "running": 0}

    cluster.cli_json("ingest", str(image_result(tmp_path, [3])))
    client = cluster.client()
    try:
        deadline = time.monotonic() + 60  # announced again within 0.5 s of a change
        while time.monotonic() < deadline:
            (live,) = client.state.view.live_workers()
            if live.active == 1:
                break
            time.sleep(0.2)
    finally:
        client.close()
    busy = cluster.cli_json("status")
    assert busy["workers"][0]["active"] == 1
    assert busy["workers"][0]["active_by_queue"] == {"vision": 1}
    assert busy["queues"]["vision"] == {"waiting": 0, "running": 1}
    text = cluster.cli("status")
    assert text.returncode == 0 and "workers online: 1" in text.stdout
    assert "active=1" in text.stdout
    # Nothing was broadcast to the workers: no reply queue of a Celery `inspect`.
    raw = redis.Redis.from_url(cluster.broker.url)
    try:
        assert not [k for k in raw.keys("*") if b"reply.celery.pidbox" in k]
    finally:
        raw.close()


def test_stale_announcements_are_not_live_workers(cluster: Cluster) -> None:
    client = cluster.client()

    def announce(name: str, age: float) -> None:
        seen = client.state.view.now() - age
        entry = {"name": name, "queues": ["stt"], "pool": "prefork", "seen": seen}
        client.redis.hset(keys.WORKERS, name, json.dumps(entry))

    try:
        announce("gone@x", 60)
        announce("fresh@x", 1)
        assert [w.name for w in client.state.view.live_workers()] == ["fresh@x"]
        assert [w.name for w in client.state.view.serving("stt")] == ["fresh@x"]
        assert client.state.view.serving("vision") == []
        assert [w.name for w in client.state.view.live_workers(max_age=120)] == [
            "fresh@x",
            "gone@x",
        ]
        # `status` is a new process: on a busy machine it may start after a one-off
        # announcement has gone stale, so fresh@x keeps announcing itself as a worker does.
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(1.0):
                announce("fresh@x", 0)

        beat = threading.Thread(target=heartbeat)
        beat.start()
        try:
            status = cluster.cli_json("status")
        finally:
            stop.set()
            beat.join()
    finally:
        client.close()
    assert [w["name"] for w in status["workers"]] == ["fresh@x"]


def _no_worker_line(queue: str) -> str:
    return (
        f"mcp-media: no worker serves the {queue!r} queue; the job stays queued — "
        f"start one with: mcp-media worker --queues {queue}\n"
    )


def test_wait_says_at_once_that_no_worker_serves_the_queue(
    cluster: Cluster, tmp_path: Path
) -> None:
    result = image_result(tmp_path, [4])
    # A worker that stopped announcing itself long ago does not count.
    stale = {"name": "old@x", "queues": ["vision"], "seen": 1.0}
    raw = redis.Redis.from_url(cluster.broker.url)
    raw.hset(keys.WORKERS, "old@x", json.dumps(stale))
    raw.close()
    # Without the check this waits out --wait and the subprocess timeout fails the test.
    proc = cluster.cli("ingest", str(result), "--wait", "3600", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == _no_worker_line("vision")
    (job,) = json.loads(proc.stdout)["jobs"]
    assert job["status"] == "pending"
    assert cluster.cli_json("result", job["id"])["status"] == "pending"  # still queued
    # Not waited for: said all the same, beside the agent's "still running" line.
    quick = cluster.cli("ingest", str(image_result(tmp_path, [5], "q.json")), timeout=120)
    assert quick.returncode == 0 and quick.stderr == _no_worker_line("vision")
    assert "still running" in quick.stdout

    described = cluster.cli("describe", str(noisy_png(tmp_path / "d.png", 8)), "--wait", "3600")
    # not done within the wait it was given: try again later (75), the job stays queued
    assert described.returncode == 75 and described.stderr == _no_worker_line("vision")
    assert "still running" in described.stdout


def test_wait_waits_for_served_queues_only(cluster: Cluster, tmp_path: Path) -> None:
    cluster.fake.set(reply="A served image.")
    cluster.start_worker("vision")
    noisy_png(tmp_path / "a.png", 11)
    blocks = [
        image_block((tmp_path / "a.png").read_bytes()),
        audio_block(wav_bytes(), "audio/wav"),
    ]
    result = write_result(tmp_path / "r.json", blocks)
    proc = cluster.cli("ingest", str(result), "--wait", "3600", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == _no_worker_line("stt")
    jobs = {j["capability"]: j for j in json.loads(proc.stdout)["jobs"]}
    assert jobs["vision.summarize"]["status"] == "done"
    assert jobs["audio.transcribe"]["status"] == "pending"
    assert "A served image." in json.loads(proc.stdout)["text"]


def _embedded_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    return {**env, "MCP_MEDIA_HOME": str(home), "MCP_MEDIA_VISION__PROVIDER": "none"}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_embedded_env(home),
        timeout=120,
        check=False,
    )


def _gone(pid: int) -> bool:
    """The process has exited: no such pid, or a zombie waiting for its reaper."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_a_command_says_when_it_starts_the_embedded_broker_and_down_stops_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    try:
        first = _cli(home, "status", "--json")
        assert first.returncode == 0, first.stderr
        running = running_embedded(home)
        assert running is not None
        assert first.stderr == (
            f"mcp-media: started the embedded broker on 127.0.0.1:{running.port} "
            "(stop it with: mcp-media down)\n"
        )
        again = _cli(home, "result", "f" * 64)  # reuses it: nothing more to say about it
        assert again.returncode == 1 and "embedded broker" not in again.stderr

        down = _cli(home, "down")
        assert (down.returncode, down.stdout) == (0, "")
        assert (
            down.stderr == f"mcp-media: stopped the embedded broker on 127.0.0.1:{running.port}\n"
        )
        assert running_embedded(home) is None
        assert running.pid is not None
        assert _gone(running.pid)

        twice = _cli(home, "down")
        assert twice.returncode == 0
        assert twice.stderr == f"mcp-media: no embedded broker is running for {home}\n"
    finally:
        stop_embedded(home)
