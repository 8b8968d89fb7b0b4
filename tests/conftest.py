"""Shared fixtures: every test gets its own MCP_MEDIA_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipelines.cache import CacheLimits, MediaCache
from tests.support.cluster import Cluster
from tests.support.fake_openai import FakeOpenAI
from workers.broker import Broker, ensure_embedded, stop_embedded


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


@pytest.fixture
def cluster(tmp_path: Path, broker: Broker, fake_openai: FakeOpenAI) -> Iterator[Cluster]:
    """A fresh home and an empty Redis for each test; workers are stopped afterwards."""
    client = redis.Redis.from_url(broker.url)
    client.flushall()
    client.close()
    made = Cluster(tmp_path / "home", broker, fake_openai)
    yield made
    made.stop()
