"""Readiness: a worker consumes jobs only after its engines load and a tiny probe passes.

Speech models are probed in a short-lived child process, so the worker's parent never
loads a model (children load their own after fork) and a model that would crash the
process takes only the probe down, with a clear message.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

from pipelines.errors import ConfigError
from workers.configs import vision_config
from workers.settings import Settings


def check_ready(settings: Settings, queues: Sequence[str]) -> None:
    if "vision" in queues:
        vision_config(settings)  # configuration errors surface here, not at every job
    speech = [q for q in queues if q in ("stt", "tts")]
    if speech:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "workers.runtime.probe", *speech],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
            raise ConfigError(f"speech probe failed for {','.join(speech)}: {detail[-600:]}")
        sys.stderr.write(
            f"mcp-media: {','.join(speech)} probe passed in {time.monotonic() - started:.1f} s: "
            f"{proc.stdout.strip()}\n"
        )
