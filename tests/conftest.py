"""Shared fixtures: every test gets its own MCP_MEDIA_HOME."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from pipelines.cache import CacheLimits, MediaCache
from tests.support.cluster import Cluster
from tests.support.fake_openai import FakeOpenAI
from workers.broker import Broker, ensure_embedded, stop_embedded
from workers.provisioning.models import ModelInfo, prepare


@pytest.fixture
def cache(tmp_path: Path) -> MediaCache:
    return MediaCache(tmp_path / "home" / "cache", CacheLimits(max_blob_bytes=1024 * 1024))


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    home = tmp_path_factory.mktemp("broker")
    started = ensure_embedded(home)
    yield started
    stop_embedded(home)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    # One per test: a request a previous test left hanging must not count here.
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium (Selenium is imported only by the tests that use it)."""
    from tests.support.browser import chromium

    with chromium() as driver:
        yield driver


@pytest.fixture
def cluster(tmp_path: Path, broker: Broker, fake_openai: FakeOpenAI) -> Iterator[Cluster]:
    """A fresh home and an empty Redis for each test; workers are stopped afterwards."""
    client = redis.Redis.from_url(broker.url)
    client.flushall()
    client.close()
    made = Cluster(tmp_path / "home", broker, fake_openai)
    yield made
    made.stop()


# Tests on real models share one prepared home per session: MCP_MEDIA_TEST_HOME, else
# MCP_MEDIA_HOME, else `.home` in the repository (what `make` uses). The first session on a
# fresh home runs a full `prepare` (about a minute); later ones pay a few milliseconds.
DEFAULT_TEST_HOME = Path(__file__).resolve().parents[1] / ".home"


def _log(message: str) -> None:
    print(f"[models] {message}", file=sys.stderr)


@pytest.fixture(scope="session")
def prepared_models() -> list[ModelInfo]:
    chosen = os.environ.get("MCP_MEDIA_TEST_HOME") or os.environ.get("MCP_MEDIA_HOME")
    home = Path(chosen) if chosen else DEFAULT_TEST_HOME
    return prepare(home, log=_log)


@pytest.fixture(scope="session")
def models_home(prepared_models: list[ModelInfo]) -> Path:
    """A home whose `models/` holds every default model, complete."""
    return prepared_models[0].path.parent.parent
