"""`mcp-media reprocess` on a real cluster: selection from the disk, resumability,
new processor versions, forced runs, back-pressure and the single-run lock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import redis

from pipelines import ingest
from tests.faults.scenarios import image_jobs
from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_vision_jobs import image_result
from tests.support.serve import serve
from workers.core.gateway import QueueFull

pytestmark = pytest.mark.integration


def seed(cluster: Cluster, tmp_path: Path, seeds: list[int]) -> None:
    """Cache images without enqueueing anything, as an older install would have left them."""
    result = image_result(tmp_path, seeds, name=f"seed-{seeds[0]}.json")
    rendered = ingest(result.read_text(), cache=cluster.settings().media_cache())
    assert len(rendered.media) == len(seeds)


def test_dry_run_then_run_then_nothing_left(cluster: Cluster, tmp_path: Path) -> None:
    seed(cluster, tmp_path, [1, 2, 3, 4, 5])
    dry = cluster.cli_json("reprocess", "--dry-run")
    assert dry["selected"] == 5 and dry["enqueued"] == 0
    assert dry["by_kind"] == {"image": 5}
    assert cluster.fake.request_count == 0

    cluster.start_worker("vision")
    done = cluster.cli_json("reprocess", "--kind", "image")
    assert done == {
        "total": 5,
        "resumed": 0,
        "selected": 5,
        "enqueued": 5,
        "skipped": 0,
        "done": 5,
        "degraded": 0,
        "failed": 0,
    }
    assert cluster.fake.request_count == 5

    again = cluster.cli_json("reprocess")
    assert again["selected"] == 0 and again["skipped"] == 5

    # Redis lost: the sidecars on disk still say what is done.
    client = redis.Redis.from_url(cluster.broker.url)
    client.flushall()
    client.close()
    after_flush = cluster.cli_json("reprocess", "--dry-run")
    assert after_flush["selected"] == 0 and after_flush["skipped"] == 5


def test_a_new_prompt_selects_everything_again_and_all_forces(
    cluster: Cluster, tmp_path: Path
) -> None:
    seed(cluster, tmp_path, [10, 11, 12])
    worker = cluster.start_worker("vision")
    assert cluster.cli_json("reprocess")["done"] == 3
    worker.stop()

    prompt = {"MCP_MEDIA_VISION__PROMPT": "Only list the text."}
    cluster.start_worker("vision", MCP_MEDIA_VISION__PROMPT=prompt["MCP_MEDIA_VISION__PROMPT"])
    rerun = cluster.cli_json("reprocess", **prompt)
    assert rerun["selected"] == 3 and rerun["done"] == 3
    assert cluster.fake.request_count == 6
    assert {r.prompt for r in cluster.fake.received[3:]} == {"Only list the text."}

    forced = cluster.cli_json("reprocess", "--all", **prompt)
    assert forced["selected"] == 3 and forced["done"] == 3
    assert cluster.fake.request_count == 9


def test_degraded_results_are_retried_only_when_asked(cluster: Cluster, tmp_path: Path) -> None:
    seed(cluster, tmp_path, [20, 21])
    cluster.fake.set(mode="error", status=500)
    cluster.start_worker("vision")
    first = cluster.cli_json("reprocess")
    assert first["degraded"] == 2
    assert cluster.cli_json("reprocess")["selected"] == 0
    cluster.fake.set(mode="ok")
    retried = cluster.cli_json("reprocess", "--include-degraded")
    assert retried["selected"] == 2 and retried["done"] == 2


def test_back_pressure_and_the_single_run_lock(cluster: Cluster, tmp_path: Path) -> None:
    seed(cluster, tmp_path, list(range(30, 42)))
    lanes = {"MCP_MEDIA_JOBS__HIGH_WATER": "3", "MCP_MEDIA_JOBS__BATCH_HIGH_WATER": "3"}
    env = cluster.env(**lanes)
    run = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", "reprocess", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    client = redis.Redis.from_url(cluster.broker.url)
    try:
        deadline = time.monotonic() + 30
        while client.llen("vision.batch") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        observed = []
        for _ in range(20):
            observed.append(int(client.llen("vision.batch")))
            time.sleep(0.05)
        assert max(observed) == 3  # no worker yet: the run holds at the batch lane's high water
        # The batch lane is full; live work is admitted by the live lane's own high water.
        live = image_jobs(cluster, tmp_path, range(60, 64))
        door = cluster.client(**lanes)
        try:
            for job in live[:3]:
                door.submit_one(job.capability, job.sha256, job.path, limit=True)
            with pytest.raises(QueueFull):
                door.submit_one(live[3].capability, live[3].sha256, live[3].path, limit=True)
        finally:
            door.close()
        assert (client.llen("vision"), client.llen("vision.batch")) == (3, 3)

        second = cluster.cli("reprocess", "--kind", "image")
        assert second.returncode == 2
        assert "another reprocess run for image is in progress" in second.stderr

        cluster.start_worker("vision")
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        summary = json.loads(out)
        assert summary["enqueued"] == 12 and summary["done"] == 12
        # With --json, progress is one JSON object a line: done / total, rate, time left.
        lines = [json.loads(line)["reprocess"] for line in err.splitlines()]
        assert lines[0]["total"] == 12 and lines[-1]["done"] == 12
        assert lines[-1]["rate"] > 0 and {"eta_seconds", "seconds"} <= set(lines[-1])
        assert cluster.fake.request_count == 15  # the live jobs ran too
    finally:
        if run.poll() is None:
            run.kill()
        client.close()


def test_a_crashed_run_cannot_hold_the_lock(cluster: Cluster, tmp_path: Path) -> None:
    seed(cluster, tmp_path, list(range(50, 56)))
    env = cluster.env(MCP_MEDIA_JOBS__BATCH_HIGH_WATER="1")
    run = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", "reprocess"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )
    client = redis.Redis.from_url(cluster.broker.url)
    try:
        deadline = time.monotonic() + 30
        while not client.exists("mcp-media:reprocess:image") and time.monotonic() < deadline:
            time.sleep(0.05)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        ttl = client.ttl("mcp-media:reprocess:image")
        assert 0 < ttl <= 30  # expires by itself; nobody has to clean up after the crash
    finally:
        client.close()


HIGH_WATER_2 = {"MCP_MEDIA_JOBS__BATCH_HIGH_WATER": "2"}
CHECKPOINT = "mcp-media:reprocess-checkpoint:image"


def killed_at_high_water(env: dict[str, str], broker_url: str) -> redis.Redis[bytes]:
    """`reprocess --kind image --all` SIGKILLed once it submitted two items (no worker: it
    waits at the batch lane's high water of 2 that `env` sets); a client of the broker for
    the caller to close."""
    run = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", "reprocess", "--kind", "image", "--all"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )
    client = redis.Redis.from_url(broker_url)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            raw = client.get(CHECKPOINT)
            if raw is not None and json.loads(raw)["submitted"] == 2:
                break
            time.sleep(0.05)
        assert client.llen("vision.batch") == 2  # no worker: the run waits at the high water
    except BaseException:
        client.close()
        raise
    finally:
        run.send_signal(signal.SIGKILL)
        code = run.wait(timeout=10)
    assert code == -signal.SIGKILL
    return client


def test_a_killed_run_resumes_after_its_checkpoint(cluster: Cluster, tmp_path: Path) -> None:
    """SIGKILL mid-run: the next run lists after the last item submitted, and a forced run
    (which would otherwise submit everything again) submits each item once."""
    seed(cluster, tmp_path, list(range(60, 66)))
    client = killed_at_high_water(cluster.env(**HIGH_WATER_2), cluster.broker.url)
    try:
        stopped = json.loads(client.get(CHECKPOINT) or b"{}")
        assert stopped["submitted"] == 2 and not stopped.get("complete")
        # A dry run says what the next run would do: resume after the two.
        dry = cluster.cli_json("reprocess", "--kind", "image", "--all", "--dry-run")
        assert dry["resumed"] == 2 and dry["selected"] == 4
        client.delete("mcp-media:reprocess:image")  # what its expiry would do in 30 s

        cluster.start_worker("vision")
        resumed = cluster.cli_json("reprocess", "--kind", "image", "--all", **HIGH_WATER_2)
        assert resumed["resumed"] == 2
        assert resumed["total"] == 4 and resumed["enqueued"] == 4 and resumed["done"] == 4
        deadline = time.monotonic() + 60
        while cluster.fake.request_count < 6 and time.monotonic() < deadline:
            time.sleep(0.1)  # the two the killed run submitted finish on their own
        # Each image was summarised once: nothing the killed run submitted was sent again.
        assert cluster.fake.request_count == 6
        assert json.loads(client.get(CHECKPOINT) or b"{}")["complete"] is True
        again = cluster.cli_json("reprocess", "--kind", "image", "--all", "--dry-run")
        assert again["resumed"] == 0 and again["selected"] == 6  # a finished run starts afresh
    finally:
        client.close()


def test_the_run_shows_on_metrics_and_the_jobs_page(cluster: Cluster, tmp_path: Path) -> None:
    seed(cluster, tmp_path, [70, 71, 72])
    cluster.start_worker("vision")
    assert cluster.cli_json("reprocess", "--kind", "image")["done"] == 3
    with serve(cluster) as served, httpx2.Client(timeout=10) as http:
        auth = {"Authorization": f"Bearer {served.key}"}
        metrics = http.get(f"{served.url}/metrics", headers=auth).text
        for name, value in (("total", 3), ("submitted", 3), ("done", 3), ("running", 0)):
            assert f'mcp_media_reprocess_{name}{{kind="image"}} {value:.1f}' in metrics, name
        assert 'mcp_media_reprocess_total{kind="audio"}' not in metrics  # no audio run
    # A run over every kind is shown once, as `all` (its report sits under each kind).
    assert cluster.cli_json("reprocess")["selected"] == 0
    with serve(cluster) as served, httpx2.Client(timeout=10) as http:
        auth = {"Authorization": f"Bearer {served.key}"}
        metrics = http.get(f"{served.url}/metrics", headers=auth).text
    assert 'mcp_media_reprocess_total{kind="all"} 0.0' in metrics
    shown = [line for line in metrics.splitlines() if line.startswith("mcp_media_reprocess_")]
    assert not [line for line in shown if 'kind="image"' in line or 'kind="audio"' in line]
