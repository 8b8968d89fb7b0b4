"""Readiness: a worker consumes jobs only after its engines load and a tiny probe passes.

Speech models are probed in a short-lived child process (`python -m
workers.runtime.readiness QUEUE...`), so the worker's parent never loads a model (children
load their own after fork) and a model that would crash the process takes only the probe
down, with a clear message instead of failing every job.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

from pipelines.errors import ConfigError, MediaError
from workers.core.settings import Settings
from workers.core.stage_configs import vision_config
from workers.jobs.resources import local_resources
from workers.jobs.stages import for_queue


def check_ready(settings: Settings, queues: Sequence[str]) -> None:
    if "vision" in queues:
        vision_config(settings)  # configuration errors surface here, not at every job
    speech = [q for q in queues if q in ("stt", "tts")]
    if speech:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "workers.runtime.readiness", *speech],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
            raise ConfigError(f"speech probe failed for {','.join(speech)}: {detail[-600:]}")
        if proc.stderr.strip():  # what the probe logged: a model copy it made, say
            sys.stderr.write(proc.stderr[-4000:])
        sys.stderr.write(
            f"mcp-media: {','.join(speech)} probe passed in {time.monotonic() - started:.1f} s: "
            f"{proc.stdout.strip()}\n"
        )


def probe(queues: list[str]) -> int:
    """The child's side: load the engines of `queues` and run their probes."""
    resources = local_resources(Settings())
    report = []
    for queue in queues:
        started = time.monotonic()
        try:
            for_queue(queue).probe(resources)
        except (MediaError, OSError, RuntimeError) as exc:
            sys.stderr.write(f"{queue}: {type(exc).__name__}: {exc}\n")
            return 1
        report.append(f"{queue} ready in {time.monotonic() - started:.2f} s")
    sys.stdout.write("; ".join(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1:]))
