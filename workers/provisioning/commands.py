"""The helper processes provisioning runs: pip, npm, python -m venv, the conversion scripts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pipelines.errors import ConfigError


def run_command(command: Sequence[str | Path], what: str, *, cwd: Path | None = None) -> str:
    """Run a helper process; ConfigError with the tail of its output when it fails."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    try:
        done = subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=cwd,
        )
    except OSError as exc:
        raise ConfigError(f"{what}: cannot start {command[0]}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ConfigError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return str(done.stdout)
