"""Scale-down scenarios: workers sent SIGTERM mid-batch, as an orchestrator sends it (to the
worker's main process only), while the rest of the pool goes on. Shared by
tests/faults/test_scale_down.py and the repeated run with the cores burned:

    python -m tests.faults.scale_down --runs 5

Each scenario starts its own workers (with `JOBS__SHUTDOWN_GRACE` set), stops the survivors
when done, and returns an `Outcome` (lost and duplicated as in scenarios.py) with, per
terminated worker, whether and when it exited and how many jobs it handed back.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pipelines.media import JobRequest
from tests.faults.scenarios import (
    CpuBurners,
    Outcome,
    Spoken,
    audio_jobs,
    claim_owner,
    finish,
    image_jobs,
    outcome,
    spoken_sentences,
    stored_counts,
)
from tests.support.cluster import Cluster, Worker
from tests.support.fake_openai import FakeOpenAI
from tests.support.up import wait_for
from workers.broker.embedded import ensure_embedded, stop_embedded
from workers.gateways.cluster import JobHandle, MediaClient

# How long past its grace a terminated worker may take to be gone: a functional bound (it
# did exit, it did not wait for its jobs), far above the second the hand-back takes.
EXIT_BOUND = 30.0
_HANDED = re.compile(r"handed back (\d+) job")
# Vision jobs wait on the fake provider as long as a scenario wants: no timeout cuts them.
SLOW_PROVIDER = {
    "MCP_MEDIA_VISION__TIMEOUT": "120",
    "MCP_MEDIA_JOBS__VISION_SOFT_LIMIT": "300",
    "MCP_MEDIA_VISION__MAX_CONCURRENCY": "16",
}


def terminate(workers: Sequence[Worker], grace: float) -> dict[str, object]:
    """SIGTERM each worker's main process; wait for each to exit (at most grace + bound).
    Returns per worker: exit code (None: still running), seconds to exit, jobs handed back."""
    started = time.monotonic()
    for worker in workers:
        os.kill(worker.proc.pid, signal.SIGTERM)
    report: dict[str, object] = {}
    for index, worker in enumerate(workers):
        remaining = max(0.1, started + grace + EXIT_BOUND - time.monotonic())
        try:
            code: int | None = worker.proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            code = None
        found = _HANDED.findall(worker.text())
        report[f"victim{index}"] = {
            "exit": code,
            "exit_s": round(time.monotonic() - started, 1),
            "grace_over": bool(found),  # False: its jobs ended within the grace
            "handed_back": sum(int(n) for n in found),
        }
    return report


def _owners(client: MediaClient, jobs: Sequence[JobRequest]) -> set[int]:
    return {pid for job in jobs if (pid := claim_owner(client, job)) is not None}


def _holding(worker: Worker, owners: set[int]) -> bool:
    """A worker runs a job: its main process (threads) or a pool child (prefork) claims one."""
    return bool(owners & {worker.proc.pid, *worker.children()})


def _batch(
    cluster: Cluster,
    name: str,
    jobs: list[JobRequest],
    workers: list[Worker],
    victims: list[Worker],
    grace: float,
) -> Outcome:
    client = cluster.client()
    try:
        started = time.monotonic()
        handles = client.submit(jobs)
        # Mid-batch: every victim is running a job.
        assert wait_for(
            lambda: all(_holding(v, _owners(client, jobs)) for v in victims), timeout=240
        ), "the victims never ran a job"
        victims_report = terminate(victims, grace)
        finished, latest = finish(client, handles, timeout=300, since=started)
    finally:
        client.close()
    for worker in workers:
        worker.stop()
    result = outcome(name, cluster, finished, latest, grace_s=grace)
    result.extra.update(victims_report)
    return result


def threads_batch(
    cluster: Cluster, workdir: Path, tag: int = 0, grace: float = 3.0, latency: float = 1.0
) -> Outcome:
    """Three vision workers (threads pool, 2 threads) on 24 jobs of `latency` s each; two get
    SIGTERM while they run jobs. With jobs shorter than the grace their running jobs end and
    are acked; with longer ones they are handed back mid-batch and run elsewhere, once."""
    cluster.env_vars.update(SLOW_PROVIDER)
    cluster.fake.set(latency=latency, reply="scale-down")
    workers = [
        cluster.start_worker("vision", 2, MCP_MEDIA_JOBS__SHUTDOWN_GRACE=str(grace))
        for _ in range(3)
    ]
    seeds = range(500_000 + tag * 100, 500_024 + tag * 100)
    jobs = image_jobs(cluster, workdir, seeds)
    name = "scale_down_threads" if grace >= latency else "scale_down_threads_hand_back"
    return _batch(cluster, name, jobs, workers, workers[:2], grace)


def prefork_batch(
    cluster: Cluster, spoken: Spoken, workdir: Path, tag: int = 0, grace: float = 0.0
) -> Outcome:
    """Three STT workers (prefork, one process each) on 6 clips; one gets SIGTERM while its
    child runs a job. Grace 0: that job is handed back at once (its child killed, its message
    and claim given back) and finished by another worker."""
    workers = [
        cluster.start_worker("stt", 1, MCP_MEDIA_JOBS__SHUTDOWN_GRACE=str(grace)) for _ in range(3)
    ]
    jobs = audio_jobs(cluster, spoken, workdir, 6, repeats=2, tag=1000 + tag)
    return _batch(cluster, "scale_down_prefork", jobs, workers, workers[:1], grace)


def longer_than_grace(cluster: Cluster, workdir: Path, tag: int = 0, grace: float = 1.0) -> Outcome:
    """One vision job of 45 s on a worker that gets SIGTERM with a grace of 1 s: it hands the
    job back and exits long before the job could end; the other worker runs it, once. One
    provider slot in the cluster: the other worker gets it only if the hand-back frees it."""
    cluster.env_vars.update({**SLOW_PROVIDER, "MCP_MEDIA_VISION__MAX_CONCURRENCY": "1"})
    cluster.fake.set(latency=45.0, reply="long")
    workers = [
        cluster.start_worker("vision", 1, MCP_MEDIA_JOBS__SHUTDOWN_GRACE=str(grace))
        for _ in range(2)
    ]
    jobs = image_jobs(cluster, workdir, range(600_000 + tag, 600_001 + tag))
    client = cluster.client()
    try:
        started = time.monotonic()
        handles = client.submit(jobs)
        assert wait_for(lambda: bool(_owners(client, jobs)), timeout=120), "the job never ran"
        owner = _owners(client, jobs)
        victim = next(w for w in workers if _holding(w, owner))
        survivor = next(w for w in workers if w is not victim)
        victims_report = terminate([victim], grace)
        # Still unfinished when its first worker was gone: that worker did not wait for it.
        unfinished = not _finished(client, handles)
        finished, latest = finish(client, handles, timeout=300, since=started)
    finally:
        client.close()
    ran_on_survivor = stored_counts([survivor])[str(handles[0].key)]
    # Its claim was released with the hand-back: the other worker ran it at its first try,
    # never finding the key claimed (each such try is an attempt, retried later).
    envelope = finished[0].envelope
    attempts = envelope.attempts if envelope is not None else None
    for worker in workers:
        worker.stop()
    result = outcome(
        "scale_down_long_job",
        cluster,
        finished,
        latest,
        grace_s=grace,
        unfinished_at_exit=unfinished,
        stored_by_survivor=ran_on_survivor,
        attempts=attempts,
    )
    result.extra.update(victims_report)
    return result


def _finished(client: MediaClient, handles: Sequence[JobHandle]) -> bool:
    results = [client.state.results.get(h.key) for h in handles]
    return all(r is not None and r.status.finished for r in results)


def run(runs: int, burners: int, workdir: Path) -> int:
    from tests.faults.soak import models_home

    home = workdir / "home"
    home.mkdir()
    (home / "models").symlink_to(models_home() / "models")
    broker = ensure_embedded(home)
    spoken = spoken_sentences(models_home())
    totals = {"lost": 0, "duplicated": 0, "not_exited": 0}
    with FakeOpenAI() as fake, CpuBurners(burners) as burn:
        print(f"scale_down: runs={runs} burners={burn.count} pids={burn.pids}", flush=True)
        cluster = Cluster(home, broker, fake)
        try:
            for index in range(1, runs + 1):
                for result in (
                    threads_batch(cluster, workdir, index),
                    threads_batch(cluster, workdir, 50 + index, grace=0.5, latency=3.0),
                    prefork_batch(cluster, spoken, workdir, index),
                    longer_than_grace(cluster, workdir, index),
                ):
                    totals["lost"] += result.lost
                    totals["duplicated"] += result.duplicated
                    totals["not_exited"] += sum(
                        1
                        for value in result.extra.values()
                        if isinstance(value, dict) and value.get("exit") is None
                    )
                    print(f"run={index} {result.line()}", flush=True)
        finally:
            cluster.stop()
            stop_embedded(home)
    print("total " + " ".join(f"{k}={v}" for k, v in totals.items()), flush=True)
    return 1 if any(totals.values()) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.scale_down", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mcp-media-scale-down-"))
    try:
        return run(args.runs, args.burners, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
