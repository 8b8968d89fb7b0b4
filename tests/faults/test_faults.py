"""Fault injection on real processes. Each scenario prints one line
`scenario=S submitted= completed= dead_lettered= failed= lost= duplicated= max_latency=`
(every figure measured) and requires lost=0 and duplicated within the promise.

The node-loss, child-kill, poison and Redis-restart scenarios are the shared functions of
scenarios.py; `make soak` runs the same functions on one cluster, N rounds, cores burned.
Run with `make test-faults`; figures of the last runs are in RELIABILITY.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pipelines.media import Capability, JobRequest
from pipelines.results import Status
from tests.faults import doors, scenarios
from tests.faults.conftest import RssSampler, report
from tests.faults.scenarios import Outcome, audio_jobs, finish, image_jobs, outcome
from tests.support.cluster import ROOT, Cluster, SplitCluster
from tests.support.up import Up
from workers.core import keys

pytestmark = pytest.mark.faults


def check(result: Outcome) -> None:
    """The promise: no job silently absent, and no key's stage run to a stored result twice."""
    report(result)
    assert result.lost == 0, result.line()
    assert result.duplicated == 0, result.line()


def test_node_loss_recovers_every_job_without_resubmission(
    node: Cluster, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    result = scenarios.node_loss(node, spoken, tmp_path)
    check(result)
    assert result.completed == result.submitted


def test_child_sigkill_is_redelivered(
    node: Cluster, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    result = scenarios.child_sigkill(node, spoken, tmp_path)
    check(result)
    assert result.completed == result.submitted
    assert result.extra["worker_lost_seen"] is True


def test_poison_job_is_dead_lettered_and_others_flow(
    node: Cluster, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    result = scenarios.poison_job(node, spoken, tmp_path)
    check(result)
    assert result.dead_lettered == 1
    assert result.completed == result.submitted - 1


@pytest.mark.parametrize("hard", [False, True], ids=["clean", "kill9"])
def test_redis_restart_mid_burst(node: Cluster, tmp_path: Path, hard: bool) -> None:
    result = scenarios.redis_restart(node, tmp_path, hard=hard)
    check(result)
    assert result.completed == result.submitted
    # The consumer saw the connection drop while the broker was down (it was not frozen).
    assert result.extra["loss_noticed_in"] != "never", result.line()


def test_a_worker_takes_a_job_again_after_the_broker_restarts(
    node: Cluster, tmp_path: Path
) -> None:
    # Down 2.5 s: past the 2 s try of kombu's own back-off (its next came 6 s in).
    result = scenarios.first_job_after_restart(node, tmp_path, down_for=2.5)
    check(result)  # the line carries first_job_s: a figure, not an assertion
    assert result.completed == result.submitted == 1, result.line()


def test_node_loss_on_nodes_that_share_only_redis_and_a_bucket(
    split_node: SplitCluster, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    result = scenarios.node_loss(split_node, spoken, tmp_path)
    result.scenario += "_shared_nothing"
    check(result)
    assert result.completed == result.submitted
    # The worker's home holds copies of the inputs; the producer's holds no result file.
    assert split_node.worker_home is not None
    assert not list((split_node.home / "results").rglob("*.json"))
    assert list((split_node.worker_home / "cache" / "audio").iterdir())


@pytest.mark.parametrize("hard", [False, True], ids=["clean", "kill9"])
def test_redis_restart_on_nodes_that_share_only_redis_and_a_bucket(
    split_node: SplitCluster, tmp_path: Path, hard: bool
) -> None:
    result = scenarios.redis_restart(split_node, tmp_path, hard=hard)
    result.scenario += "_shared_nothing"
    check(result)
    assert result.completed == result.submitted


@pytest.mark.parametrize("fault", ["worker_kill", "redis_kill9"])
def test_door_clients_get_answers_and_the_stack_heals(
    up_node: Up, spoken: scenarios.Spoken, tmp_path: Path, fault: str
) -> None:
    """HTTP and MCP transcriptions in flight under `up --api` while the STT worker or
    redis-server is SIGKILLed: every request answered in its protocol's shape, and the
    stack serving again with nobody restarting anything but `up`."""
    run = doors.door_worker_kill if fault == "worker_kill" else doors.door_redis_kill9
    result = run(up_node, spoken, tmp_path)
    check(result)
    assert result.extra["served_again_s"] != "never", result.line()
    assert result.extra["restarted"] == 1, up_node.text()


def test_door_clients_get_answers_through_a_full_disk_and_the_stack_heals(
    up_on_small_disk: Up, spoken: scenarios.Spoken, tmp_path: Path
) -> None:
    """The home's filesystem fills (Redis refuses writes: MISCONF) and is freed, with HTTP
    and MCP transcriptions in flight: answered in shape, and serving again by itself."""
    result = doors.door_disk_full(up_on_small_disk, spoken, tmp_path)
    check(result)
    assert result.extra["served_again_s"] != "never", result.line()
    assert result.extra["restarted"] == 0, up_on_small_disk.text()  # nothing had to die


def test_stalled_consumer_is_restarted(node: Cluster, tmp_path: Path) -> None:
    result = scenarios.stalled_consumer(node, tmp_path)
    check(result)
    assert result.completed == result.submitted
    assert result.extra["watchdog_fired"] is True


@pytest.mark.parametrize(
    ("mode", "behaviour", "reason"),
    [
        ("hang", {"mode": "slow", "delay": 120}, "timeout"),
        ("http_500", {"mode": "error", "status": 500}, "http_error"),
        ("drip", {"mode": "drip", "drip_interval": 0.5}, "timeout"),
        ("invalid_json", {"mode": "invalid_json"}, "invalid_response"),
        ("huge_body", {"mode": "huge"}, "response_too_large"),
    ],
)
def test_vision_provider_faults_degrade_within_bounds(
    node: Cluster, tmp_path: Path, mode: str, behaviour: dict[str, object], reason: str
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
    # The bound is the reason (the deadline or the size cap ended it), not a timed
    # assertion: how long it took is reported as degraded_in.
    assert (broken.envelope.reason or "").split(":")[0] == reason, broken.envelope
    assert [by_sha[j.sha256].status for j in healthy] == [Status.DONE] * 4
    check(
        outcome(
            f"vision_{mode}",
            node,
            finished,
            latest,
            degraded_in=f"{broken.envelope.elapsed_ms / 1000:.1f}s",
            reason=(broken.envelope.reason or "").split(":")[0],
        )
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
    blocks = len(json.loads(result.read_text())["content"])
    rendered = int(out["text"].endswith("still here"))
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in leftovers]
    check(
        Outcome(
            "disk_full",
            submitted=blocks,
            completed=rendered,
            dead_lettered=0,
            failed=len(out["markers"]),  # visible: a cache_error marker in the agent text
            duplicated=len(digests) - len(set(digests)),
            max_latency=time.monotonic() - started,
            extra={"marker": marker["reason"]},
        )
    )


@pytest.mark.timeout(1200)  # its own wait allows 900 s; the suite's default kill is 300 s
def test_burst_of_500_mixed_jobs(node: Cluster, spoken: scenarios.Spoken, tmp_path: Path) -> None:
    node.fake.set(latency=0.02, reply="burst image")
    images = image_jobs(node, tmp_path, range(5000, 5300))
    clips = audio_jobs(node, spoken, tmp_path, 150, repeats=1)
    from workers.core.stage_configs import store_request, synthesis_request

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
    peaks = " ".join(f"{name}:{mib:.0f}MiB" for name, mib in sorted(rss.peak.items()))
    result = outcome("burst_500", node, finished, latest, peak_rss=peaks)
    check(result)
    assert result.completed == result.submitted == len(images) + len(clips) + len(speech)
    assert max(rss.peak.values()) < 1500  # MiB per process: bounded, not growing with jobs
    with redis.Redis.from_url(node.broker.url) as r:
        assert r.llen(keys.DEAD_LETTERS) == 0
