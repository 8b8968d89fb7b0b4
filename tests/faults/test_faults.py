"""Fault injection on real processes: each scenario prints
`scenario: submitted=N completed=N lost=N duplicated=N max_latency=Xs` and requires lost=0.

Run with `make test-faults`; figures of the last run are in RELIABILITY.md.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis

from pipelines.media import Capability, JobRequest, MediaKind
from pipelines.results import ResultKey, Status
from tests.faults.conftest import (
    RssSampler,
    descendants,
    long_clip,
    report,
    start_fault_worker,
    stored_counts,
    wait_for,
)
from tests.integration.test_vision_jobs import noisy_png
from tests.support.cluster import ROOT, Cluster
from tests.support.fault_worker import POISON_TASK, POISON_VERSION
from workers import keys
from workers.client import JobHandle, MediaClient

pytestmark = pytest.mark.faults


def audio_jobs(
    cluster: Cluster, spoken: object, tmp_path: Path, count: int, repeats: int = 3
) -> list[JobRequest]:
    cache = cluster.settings().media_cache()
    jobs = []
    for i in range(count):
        clip = long_clip(spoken, i, tmp_path / f"clip{i}.wav", repeats)  # type: ignore[arg-type]
        stored = cache.store_file(clip, MediaKind.AUDIO)
        jobs.append(JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path))
    return jobs


def image_jobs(
    cluster: Cluster, tmp_path: Path, seeds: range, size: tuple[int, int] = (64, 48)
) -> list[JobRequest]:
    cache = cluster.settings().media_cache()
    jobs = []
    for seed in seeds:
        stored = cache.store_file(noisy_png(tmp_path / f"i{seed}.png", seed, size), MediaKind.IMAGE)
        jobs.append(JobRequest(Capability.VISION_SUMMARIZE, stored.sha256, stored.path))
    return jobs


def finish(
    client: MediaClient, handles: list[JobHandle], timeout: float, since: float
) -> tuple[list[JobHandle], float]:
    """Wait for every handle; returns them and the latest completion time after `since`."""
    deadline = time.monotonic() + timeout
    latest = 0.0
    pending = list(handles)
    done: list[JobHandle] = []
    while pending and time.monotonic() < deadline:
        waited = client.wait(pending, timeout=1.0)
        for handle in waited:
            if handle.envelope is not None:
                done.append(handle)
                latest = time.monotonic() - since
        pending = [h for h in waited if h.envelope is None]
    return done + pending, latest


def claimed(client: MediaClient, jobs: list[JobRequest]) -> int:
    return sum(client.store.claimed(client.key(j.capability, j.sha256)) for j in jobs)


def test_node_loss_recovers_every_job_without_resubmission(
    node: Cluster, spoken: object, tmp_path: Path
) -> None:
    jobs = audio_jobs(node, spoken, tmp_path, 8)
    worker = node.start_worker("stt", concurrency=2)
    client = node.client()
    handles = client.submit(jobs)
    assert wait_for(lambda: claimed(client, jobs) >= 2, timeout=60)
    time.sleep(1.5)  # appendfsync everysec: what was written a second ago is on disk
    worker.kill()
    os.kill(node.broker.pid or 0, signal.SIGKILL)
    time.sleep(1)

    from workers.broker import ensure_embedded

    restarted = ensure_embedded(node.home)
    assert restarted.url == node.broker.url  # same port: clients reconnect by themselves
    restart = time.monotonic()
    node.start_worker("stt", concurrency=2)
    finished, latest = finish(client, handles, timeout=120, since=restart)
    client.close()
    completed = sum(1 for h in finished if h.status is Status.DONE)
    duplicated = sum(n - 1 for n in stored_counts(node.workers).values() if n > 1)
    report(
        "node_loss",
        submitted=len(jobs),
        completed=completed,
        duplicated=duplicated,
        max_latency=latest,
    )
    assert completed == len(jobs)
    assert latest < 120
    assert duplicated == 0


def test_child_sigkill_is_redelivered(node: Cluster, spoken: object, tmp_path: Path) -> None:
    jobs = audio_jobs(node, spoken, tmp_path, 1, repeats=6)
    worker = node.start_worker("stt", concurrency=1)
    client = node.client()
    started = time.monotonic()
    handles = client.submit(jobs)
    assert wait_for(lambda: claimed(client, jobs) == 1, timeout=60)
    children = descendants(worker.proc.pid)[1:]
    assert children, "a prefork worker has a pool child"
    for child in children:
        os.kill(child, signal.SIGKILL)  # what the OOM killer does
    finished, latest = finish(client, handles, timeout=120, since=started)
    client.close()
    (handle,) = finished
    assert handle.status is Status.DONE, handle
    assert "WorkerLostError" in worker.text() or "exited with" in worker.text()
    duplicated = sum(n - 1 for n in stored_counts(node.workers).values() if n > 1)
    report("child_sigkill", submitted=1, completed=1, duplicated=duplicated, max_latency=latest)
    assert duplicated == 0


def test_poison_job_is_dead_lettered_and_others_flow(
    node: Cluster, spoken: object, tmp_path: Path
) -> None:
    jobs = audio_jobs(node, spoken, tmp_path, 4, repeats=1)
    start_fault_worker(node, "stt", concurrency=1)
    client = node.client()
    started = time.monotonic()
    poison_sha = jobs[0].sha256
    poison_key = ResultKey(Capability.AUDIO_TRANSCRIBE, POISON_VERSION, poison_sha)
    poison_id = str(uuid.uuid4())
    kwargs = {"key": str(poison_key), "path": str(jobs[0].path), "trace_id": "poison", "params": {}}
    record = {"task": POISON_TASK, "kwargs": kwargs, "queue": "stt", "soft": 60, "hard": 90}
    client.store.record_job(poison_id, record, 3600)
    client.app.send_task(POISON_TASK, kwargs=kwargs, task_id=poison_id, queue="stt")
    handles = client.submit(jobs)
    poison = JobHandle(poison_id, poison_key, jobs[0].path, Status.PENDING)
    finished, latest = finish(client, [*handles, poison], timeout=180, since=started)
    dead = client.store.dead_letters()
    client.close()
    by_id = {h.id: h for h in finished}
    poisoned = by_id[poison_id].envelope
    assert poisoned is not None and poisoned.status is Status.FAILED
    assert "dead-lettered" in (poisoned.reason or "")
    assert [d["job_id"] for d in dead] == [poison_id]
    completed = sum(1 for h in handles if by_id[h.id].status is Status.DONE)
    report(
        "poison_job",
        submitted=len(jobs) + 1,
        completed=completed + 1,
        duplicated=0,
        max_latency=latest,
        dead_lettered=len(dead),
    )
    assert completed == len(jobs)


def test_redis_restart_mid_burst(node: Cluster, tmp_path: Path) -> None:
    node.fake.set(latency=0.05, reply="burst")
    jobs = image_jobs(node, tmp_path, range(1000, 1100))
    node.start_worker("vision", concurrency=4)
    client = node.client()
    started = time.monotonic()
    handles = client.submit(jobs)
    assert wait_for(lambda: node.fake.request_count >= 25, timeout=60)

    from workers.broker import ensure_embedded, stop_embedded

    stop_embedded(node.home)  # a clean restart: the AOF holds every acknowledged write
    time.sleep(2)
    ensure_embedded(node.home)
    finished, latest = finish(client, handles, timeout=180, since=started)
    client.close()
    completed = sum(1 for h in finished if h.status is Status.DONE)
    duplicated = sum(n - 1 for n in stored_counts(node.workers).values() if n > 1)
    report(
        "redis_restart",
        submitted=len(jobs),
        completed=completed,
        duplicated=duplicated,
        max_latency=latest,
    )
    assert completed == len(jobs)


@pytest.mark.parametrize(
    ("mode", "behaviour"),
    [
        ("hang", {"mode": "slow", "delay": 120}),
        ("http_500", {"mode": "error", "status": 500}),
        ("drip", {"mode": "drip", "drip_interval": 0.5}),
        ("invalid_json", {"mode": "invalid_json"}),
        ("huge_body", {"mode": "huge"}),
    ],
)
def test_vision_provider_faults_degrade_within_bounds(
    node: Cluster, tmp_path: Path, mode: str, behaviour: dict[str, object]
) -> None:
    node.fake.set(only_width=77, **behaviour)
    bad = image_jobs(node, tmp_path, range(1), size=(77, 50))
    healthy = image_jobs(node, tmp_path, range(10, 14))
    node.start_worker("vision", concurrency=4)
    client = node.client()
    started = time.monotonic()
    handles = client.submit([*bad, *healthy])
    finished, latest = finish(client, handles, timeout=60, since=started)
    client.close()
    by_sha = {h.key.sha256: h for h in finished}
    broken = by_sha[bad[0].sha256]
    assert broken.status is Status.DEGRADED, broken
    assert broken.envelope is not None
    assert broken.envelope.elapsed_ms <= (3 + 2) * 1000  # timeout 3 s + 2 s
    assert [by_sha[j.sha256].status for j in healthy] == [Status.DONE] * 4
    report(
        f"vision_{mode}",
        submitted=5,
        completed=5,
        duplicated=0,
        max_latency=latest,
        degraded_in=f"{broken.envelope.elapsed_ms / 1000:.1f}s",
        reason=(broken.envelope.reason or "").split(":")[0],
    )


def test_disk_full_while_caching_leaves_no_partial_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    blob = os.urandom(3 * 1024 * 1024)
    import base64

    result = tmp_path / "big.json"
    result.write_text(
        json.dumps(
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "x://r/big.bin",
                            "blob": base64.b64encode(blob).decode(),
                        },
                    },
                    {"type": "text", "text": "still here"},
                ]
            }
        )
    )

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "ingest", str(result), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        preexec_fn=small_disk,
        env={**os.environ, "MCP_MEDIA_HOME": str(home), "MCP_MEDIA_VISION__ENABLED": "false"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (marker,) = out["markers"]
    assert marker["reason"] == "cache_error"
    assert "File too large" in marker["message"]
    assert out["text"].endswith("still here")
    leftovers = [p for p in (home / "cache").rglob("*") if p.is_file()]
    assert leftovers == []
    report(
        "disk_full",
        submitted=1,
        completed=1,
        duplicated=0,
        max_latency=time.monotonic() - started,
        marker=marker["reason"],
    )


def test_burst_of_500_mixed_jobs(node: Cluster, spoken: object, tmp_path: Path) -> None:
    node.fake.set(latency=0.02, reply="burst image")
    images = image_jobs(node, tmp_path, range(5000, 5300))
    clips = audio_jobs(node, spoken, tmp_path, 150, repeats=1)
    from workers.configs import store_request, synthesis_request

    settings = node.settings()
    speech = []
    for i in range(50):
        stored = store_request(settings, synthesis_request(f"Item number {i} is ready.", settings))
        speech.append(JobRequest(Capability.AUDIO_SYNTHESIZE, stored.sha256, stored.path))
    workers = [
        node.start_worker("vision", concurrency=4),
        node.start_worker("stt", concurrency=1),
        node.start_worker("tts", concurrency=1),
    ]
    client = node.client()
    started = time.monotonic()
    with RssSampler(workers) as rss:
        handles = client.submit([*images, *clips, *speech])
        finished, latest = finish(client, handles, timeout=900, since=started)
    client.close()
    completed = sum(1 for h in finished if h.status is Status.DONE)
    duplicated = sum(n - 1 for n in stored_counts(node.workers).values() if n > 1)
    peaks = " ".join(f"{name}:{mib:.0f}MiB" for name, mib in sorted(rss.peak.items()))
    report(
        "burst_500",
        submitted=len(handles),
        completed=completed,
        duplicated=duplicated,
        max_latency=latest,
        peak_rss=peaks,
    )
    assert completed == len(handles) == 500
    assert duplicated == 0
    assert max(rss.peak.values()) < 1500  # MiB per process: bounded, not growing with jobs
    with redis.Redis.from_url(node.broker.url) as r:
        assert r.llen(keys.DEAD_LETTERS) == 0
