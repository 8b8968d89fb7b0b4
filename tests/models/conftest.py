"""Tests on real models share the prepared models of the session (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from workers.provisioning.models import ModelInfo, prepare


@pytest.fixture
def speech_cluster(cluster: Cluster, models_home: Path) -> Iterator[Cluster]:
    """A cluster whose home sees the prepared speech models."""
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    yield cluster


@pytest.fixture(scope="session")
def quality_models(models_home: Path) -> list[ModelInfo]:
    """The quality tier (multilingual whisper base, Kokoro v1.0), prepared once."""
    return prepare(models_home, tier="quality", log=lambda message: None)
