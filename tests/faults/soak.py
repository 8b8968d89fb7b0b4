"""The fault scenarios in sequence on ONE cluster, N rounds, with every core burned.

    python -m tests.faults.soak --rounds 10      (what `make soak` runs)

One node: one embedded redis-server, one vision worker and one STT worker (production code
plus the poison task), one fake OpenAI server. Each round runs node loss, child SIGKILL,
a poison job, a clean Redis restart and a SIGKILL of redis-server, each on inputs no earlier
round used, each on whatever the scenarios before it left behind (workers that lived
through broker restarts, leases, unacked messages, dead letters). One busy-looping process
per core runs for the whole soak (started and stopped by PID here).

`--shared-nothing` runs the same rounds with the workers in a home of their own that shares
only Redis and a SeaweedFS bucket with the submitting side (the layout of several nodes).

Beside it, in a home of its own, `mcp-media up --api` for the door scenarios (tests/faults/
doors.py): HTTP and MCP transcriptions in flight while its STT worker, then its
redis-server, is SIGKILLed (`up` alone restarts them), then while its home's filesystem (a
tmpfs, when one can be mounted: root) is filled and freed, every round.

Prints one line per scenario per round and a total line; exits 1 if any job was lost or any
key stored more than one result, 2 if a scenario could not run to its end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from tests.faults import doors, scale_down, scenarios
from tests.faults.scenarios import CpuBurners, Outcome
from tests.support.cluster import ROOT, Cluster, SplitCluster
from tests.support.fake_openai import FakeOpenAI
from tests.support.net import free_port
from tests.support.seaweed import SeaweedS3, seaweed_s3
from tests.support.up import Up, node_env
from workers.broker.embedded import ensure_embedded, stop_embedded
from workers.provisioning.models import prepare

REPORT = ROOT / "tests" / "faults" / "soak_last_run.jsonl"
SOAK_DISK = "256m"


def models_home() -> Path:
    chosen = os.environ.get("MCP_MEDIA_TEST_HOME") or os.environ.get("MCP_MEDIA_HOME")
    home = Path(chosen) if chosen else ROOT / ".home"
    info = prepare(home, log=lambda message: print(f"[models] {message}", file=sys.stderr))
    return info[0].path.parent.parent


def diagnose(cluster: Cluster) -> None:
    """What the broker and the workers hold when a job is missing (to stderr)."""
    import redis

    from workers.core import keys
    from workers.files.shared_files import open_shared_files

    with redis.Redis.from_url(cluster.broker.url) as r:
        state = {
            "queues": {q: r.llen(q) for q in ("vision", "stt", "tts")},
            "unacked": r.hlen("unacked"),
            "leases": r.zcard(keys.LEASES),
        }
    state["journal"] = sum(1 for _ in open_shared_files(cluster.settings()).journal.entries())
    print(f"diagnosis: {state}", file=sys.stderr)
    for worker in cluster.workers:
        if worker.proc.poll() is None:
            tail = worker.text()[-3000:]
            print(f"--- {worker.log} (pid {worker.proc.pid})\n{tail}", file=sys.stderr)


def as_before(cluster: Cluster, scenario: Callable[[], Outcome]) -> Outcome:
    """Run a scale-down scenario on a pool of its own (the workers earlier scenarios left
    running are stopped first: with the cluster's 3 s vision timeout they would fail its
    slow jobs) and put back the workers' settings and the provider's behaviour it changed,
    for the scenarios after it."""
    cluster.stop()
    env, behaviour = dict(cluster.env_vars), cluster.fake.set()
    try:
        return scenario()
    finally:
        cluster.env_vars.clear()
        cluster.env_vars.update(env)
        cluster.fake.set(**{f.name: getattr(behaviour, f.name) for f in fields(behaviour)})


def run(rounds: int, burners: int, workdir: Path, shared_nothing: bool = False) -> int:
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(seaweed_s3(workdir / "seaweed")) if shared_nothing else None
        return _run(rounds, burners, workdir, s3)


def _run(rounds: int, burners: int, workdir: Path, s3: SeaweedS3 | None) -> int:
    home = workdir / "home"
    home.mkdir()
    # With a bucket, the workers run in a home of their own (the models are theirs).
    worker_home = workdir / "worker-home" if s3 is not None else home
    worker_home.mkdir(exist_ok=True)
    (worker_home / "models").symlink_to(models_home() / "models")
    spoken = scenarios.spoken_sentences(worker_home)
    broker = ensure_embedded(home)
    totals: dict[str, float] = dict.fromkeys(
        ("submitted", "completed", "dead_lettered", "failed", "lost", "duplicated"), 0
    )
    worst = 0.0
    broken = ran = 0
    REPORT.write_text("")
    with FakeOpenAI() as fake, CpuBurners(burners) as burn:
        layout = "shared nothing (Redis + S3 bucket)" if s3 is not None else "one home"
        print(
            f"soak: rounds={rounds} burners={burn.count} pids={burn.pids} home={home} "
            f"layout={layout}"
        )
        cluster = Cluster(home, broker, fake)
        if s3 is not None:
            cluster = SplitCluster(home, worker_home, broker, fake, s3.env("soak"))
        up_home = workdir / "up-home"
        up_home.mkdir()
        # The disk-full scenario fills it: room for the inputs of many rounds, then full.
        no_tmpfs = doors.mount_tmpfs(up_home, SOAK_DISK)
        if no_tmpfs:
            print(f"soak: door_disk_full not run (no tmpfs for it: {no_tmpfs})", flush=True)
        (up_home / "models").symlink_to(models_home() / "models")
        up = Up(up_home, node_env(up_home, fake), api_port=free_port()).start()
        try:
            up.wait_ready()
            up.wait_api()
            for r in range(1, rounds + 1):
                steps: list[tuple[str, Callable[[int], Outcome]]] = [
                    ("node_loss", lambda t: scenarios.node_loss(cluster, spoken, workdir, t)),
                    (
                        "child_sigkill",
                        lambda t: scenarios.child_sigkill(cluster, spoken, workdir, t),
                    ),
                    ("poison_job", lambda t: scenarios.poison_job(cluster, spoken, workdir, t)),
                    (
                        "redis_restart",
                        lambda t: scenarios.redis_restart(cluster, workdir, t, hard=False),
                    ),
                    (
                        "redis_kill9",
                        lambda t: scenarios.redis_restart(cluster, workdir, t, hard=True),
                    ),
                    ("door_worker_kill", lambda t: doors.door_worker_kill(up, spoken, workdir, t)),
                    ("door_redis_kill9", lambda t: doors.door_redis_kill9(up, spoken, workdir, t)),
                ]
                if no_tmpfs is None:
                    steps.append(
                        ("door_disk_full", lambda t: doors.door_disk_full(up, spoken, workdir, t))
                    )
                steps += [
                    (
                        "scale_down_threads_hand_back",
                        lambda t: as_before(
                            cluster,
                            lambda: scale_down.threads_batch(
                                cluster, workdir, t, grace=0.5, latency=3.0
                            ),
                        ),
                    ),
                    (
                        "scale_down_prefork",
                        lambda t: as_before(
                            cluster, lambda: scale_down.prefork_batch(cluster, spoken, workdir, t)
                        ),
                    ),
                ]
                for index, (name, step) in enumerate(steps):
                    tag = r * 10 + index
                    ran += 1
                    try:
                        result = step(tag)
                    except Exception:
                        broken += 1
                        print(f"round={r} scenario={name} error:", file=sys.stderr)
                        traceback.print_exc()
                        continue
                    print(f"round={r} {result.line()}", flush=True)
                    if result.lost:
                        diagnose(cluster)
                    with REPORT.open("a") as out:
                        out.write(json.dumps({"round": r, **result.to_json()}) + "\n")
                    for field in totals:
                        totals[field] += getattr(result, field)
                    worst = max(worst, result.max_latency)
        finally:
            up.stop()
            cluster.stop()
            stop_embedded(home)
            if no_tmpfs is None:
                doors.unmount(up_home)
    print(
        f"total rounds={rounds} scenarios={ran - broken} errors={broken} "
        + " ".join(f"{k}={int(v)}" for k, v in totals.items())
        + f" max_latency={worst:.1f}s burners={burners}",
        flush=True,
    )
    if totals["lost"] or totals["duplicated"]:
        return 1
    return 2 if broken else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.soak", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--burners", type=int, default=os.cpu_count() or 1, help="busy processes (default: cores)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    parser.add_argument(
        "--shared-nothing",
        action="store_true",
        help="the workers in a home of their own, sharing only Redis and a SeaweedFS bucket",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-media-soak-"))
    code = 2
    try:
        code = run(args.rounds, args.burners, workdir, args.shared_nothing)
    finally:
        if args.keep or code != 0:
            print(f"soak: work folder kept (logs): {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"soak: {time.monotonic() - started:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
