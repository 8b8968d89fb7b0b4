"""Throwaway virtualenvs for tests that need another set of packages than the dev install."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path


def venv_with(target: Path, *requirements: str) -> Path:
    """A new virtualenv at `target` with `requirements` pip-installed; its python."""
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *requirements],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python
