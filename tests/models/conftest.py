"""Tests on real models share one prepared home per session.

``MCP_MEDIA_TEST_HOME`` picks the home, else ``MCP_MEDIA_HOME``, else ``.home`` in the
repository (what ``make`` uses). The first session on a
fresh home runs a full ``prepare`` (about a minute: wheels, conversion venv, whisper export);
later sessions find the models complete and pay a few milliseconds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from workers.models import ModelInfo, prepare

DEFAULT_TEST_HOME = Path(__file__).resolve().parents[2] / ".home"


def _log(message: str) -> None:
    print(f"[models] {message}", file=sys.stderr)


@pytest.fixture(scope="session")
def prepared_models() -> list[ModelInfo]:
    chosen = os.environ.get("MCP_MEDIA_TEST_HOME") or os.environ.get("MCP_MEDIA_HOME")
    home = Path(chosen) if chosen else DEFAULT_TEST_HOME
    return prepare(home, log=_log)


@pytest.fixture(scope="session")
def models_home(prepared_models: list[ModelInfo]) -> Path:
    """A home whose ``models/`` holds every default model, complete."""
    return prepared_models[0].path.parent.parent
