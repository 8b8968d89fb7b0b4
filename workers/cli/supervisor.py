"""Process management for `mcp-media up` and `mcp-media worker`."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from celery import Celery
from celery.signals import worker_init

from workers.core.capabilities import CAPABILITIES, lane_queues
from workers.core.settings import Settings
from workers.runtime.lifeline import dies_with_this_process

log = logging.getLogger(__name__)

GRACE_SECONDS = 60.0


def pool_for(queues: Sequence[str]) -> str:
    """Threads for I/O-bound queues only; prefork as soon as a CPU-bound queue is served."""
    pools = {spec.pool for spec in CAPABILITIES.values() if spec.queue in queues}
    return "threads" if pools == {"threads"} else "prefork"


def default_concurrency(settings: Settings, queues: Sequence[str]) -> int:
    match list(queues):
        case ["vision"]:
            return settings.vision.concurrency
        case ["stt"]:
            return settings.stt.processes()
        case ["tts"]:
            return settings.tts.processes()
        case ["documents"]:
            return settings.documents.concurrency
    return max(1, available_cores() // speech_threads(settings, queues))


def available_cores() -> int:
    """The cores this process may run on (taskset/cgroup affinity), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def speech_threads(settings: Settings, queues: Sequence[str]) -> int:
    threads = [settings.stt.threads] if "stt" in queues else []
    threads += [settings.tts.threads] if "tts" in queues else []
    return max(threads, default=1)


def plan_concurrency(settings: Settings, queues: Sequence[str], requested: int | None) -> int:
    """Processes x onnx threads never exceed the cores given to a CPU-bound worker."""
    concurrency = requested or default_concurrency(settings, queues)
    if pool_for(queues) == "threads":
        return concurrency
    threads = speech_threads(settings, queues)
    ceiling = max(1, available_cores() // threads)
    if concurrency > ceiling:
        sys.stderr.write(
            f"mcp-media: {concurrency} processes x {threads} threads exceed "
            f"{available_cores()} cores; running {ceiling} processes\n"
        )
        return ceiling
    return concurrency


def node_name(queues: Sequence[str]) -> str:
    return f"{'+'.join(queues)}-{os.getpid()}@{socket.gethostname()}"


def run_worker(
    app: Celery, settings: Settings, queues: Sequence[str], concurrency: int | None
) -> int:
    """Run a Celery worker for `queues` in this process until it is stopped; its exit code.

    What the worker is (queues, pool, processes, threads) goes on the app's configuration,
    where its signal hooks and heartbeat (and the forked pool children) read it.
    """
    pool = pool_for(queues)
    name = node_name(queues)
    processes = plan_concurrency(settings, queues, concurrency)
    app.conf.mcp_media_worker = {
        "name": name,
        "queues": list(queues),
        "pool": pool,
        "concurrency": processes,
        "threads": speech_threads(settings, queues) if pool == "prefork" else 1,
        "pid": os.getpid(),
        "started_at": time.time(),
        "versions": announced_versions(settings, queues),
    }
    # `worker_main` drops the worker's exit code: an "Unrecoverable error" would exit 0,
    # and whoever supervises the process could not tell it from a requested stop.
    started: list[Any] = []
    worker_init.connect(lambda sender=None, **_: started.append(sender), weak=False)
    app.worker_main(_worker_argv(name, queues, pool, processes))
    code = getattr(started[-1], "exitcode", None) if started else None
    return int(code or 0)


def announced_versions(settings: Settings, queues: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What this worker runs of each capability it serves, for producers to key jobs by."""
    versions: dict[str, dict[str, Any]] = {}
    for spec in CAPABILITIES.values():
        if spec.queue in queues:
            try:
                versions[spec.capability.value] = spec.announce(settings)
            except Exception:  # no models: the probe says why; producers use their own
                log.warning("cannot announce the %s version", spec.capability, exc_info=True)
    return versions


def _worker_argv(name: str, queues: Sequence[str], pool: str, processes: int) -> list[str]:
    return [
        "worker",
        "--queues",
        ",".join(lane_queues(queues)),  # each capability's live and batch lanes
        "--pool",
        pool,
        "--concurrency",
        str(processes),
        "--hostname",
        name,
        "--loglevel",
        "INFO",
        "--without-mingle",
        "--without-gossip",
    ]


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    log_start: int = 0  # the log's size when this child started: what it wrote comes after

    def written(self) -> str:
        """What this child wrote to its log (the file is appended to across runs)."""
        with self.log.open("rb") as handle:
            handle.seek(self.log_start)
            return handle.read().decode(errors="replace")


def spawn_worker(
    queues: Sequence[str], log_dir: Path, env: dict[str, str], concurrency: int | None = None
) -> Child:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"worker-{'+'.join(queues)}.log"
    start = log.stat().st_size if log.exists() else 0
    cmd = [sys.executable, "-m", "workers.cli.main", "worker", "--queues", ",".join(queues)]
    if concurrency:
        cmd += ["--concurrency", str(concurrency)]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a Ctrl-C reaches the supervisor only: it stops warmly
            preexec_fn=dies_with_this_process(),  # and a killed supervisor takes them along
        )
    return Child("+".join(queues), proc, log, start)


def stop_children(children: Sequence[Child], grace: float = GRACE_SECONDS) -> None:
    """Warm shutdown (SIGTERM: finish running jobs), then SIGKILL after the grace period."""
    for child in children:
        if child.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        remaining = max(0.1, deadline - time.monotonic())
        try:
            child.proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait(timeout=10)


class StopRequested(Exception):
    pass


def raise_on_signals() -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise StopRequested(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
