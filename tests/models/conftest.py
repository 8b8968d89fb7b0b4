"""Tests on real models share the prepared models of the session (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def speech_cluster(cluster: Cluster, models_home: Path) -> Iterator[Cluster]:
    """A cluster whose home sees the prepared speech models."""
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    yield cluster
