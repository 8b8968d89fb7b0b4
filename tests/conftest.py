"""Shared fixtures: every test gets its own MCP_MEDIA_HOME."""

from __future__ import annotations

import gc
import os
import platform
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from pipelines.cache import CacheLimits, MediaCache
from tests.support.cluster import Cluster
from tests.support.fake_openai import FakeOpenAI
from tests.support.seaweed import SeaweedS3, seaweed_s3
from workers.broker.embedded import Broker, ensure_embedded, stop_embedded
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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    """One SeaweedFS for the session; each test gets its own prefix of its bucket."""
    with seaweed_s3(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


@pytest.fixture
def nodes(
    tmp_path: Path, broker: Broker, fake_openai: FakeOpenAI, s3_server: SeaweedS3
) -> Iterator[tuple[Cluster, Cluster]]:
    """Two nodes with separate homes that share only Redis and an S3 bucket: (producer,
    worker node). Workers are started on the second by the test."""
    client = redis.Redis.from_url(broker.url)
    client.flushall()
    client.close()
    prefix = f"t-{secrets.token_hex(6)}"
    made = (
        Cluster(tmp_path / "node-a", broker, fake_openai),
        Cluster(tmp_path / "node-b", broker, fake_openai),
    )
    for node in made:
        node.env_vars.update(s3_server.env(prefix))
    yield made
    for node in made:
        node.stop()


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


# Every test names its tier, and the unit tier starts no process: both are checked here, so
# that a test cannot drift into the wrong tier unnoticed.
TIERS = ("unit", "integration", "models", "faults")
_SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec"}
)
_spawned: list[str] = []
_watching = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event in _SPAWN_EVENTS:
        _spawned.append(f"{event} {str(args[:2])[:200]}")


sys.addaudithook(_audit)
# The openai client asks `platform` for the processor, which runs `uname -p` once per process
# and caches it: asked here, outside any test, so it is not counted against the first one.
platform.processor()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's tier is its closest tier marker (a test's own overrides its module's);
    a test without one is an error. Runs before `-m` selects, so `-m unit` sees one tier."""
    tiers: dict[str, str] = {}
    untiered = []
    for item in items:
        closest = next((m.name for m in item.iter_markers() if m.name in TIERS), None)
        if closest is None:
            untiered.append(item.nodeid)
        else:
            tiers[item.nodeid] = closest
    if untiered:
        listed = "\n  ".join(untiered[:20])
        raise pytest.UsageError(
            f"{len(untiered)} tests carry no tier marker ({', '.join(TIERS)}):\n  {listed}"
        )
    for item in items:
        for node in item.listchain():
            node.own_markers[:] = [m for m in node.own_markers if m.name not in TIERS]
        item.add_marker(tiers[item.nodeid])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Collect cycles once the test body is done (before its fixtures' teardown; pytest
    reports what was unraisable after that): a socket or file the test left open warns here
    and fails this test, not whichever later test the collector happens to run in. What
    survives is frozen (left out of later collections), so each collection reads only what
    the last test made: a full one read every object of the process, 0.2 s a test."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The frozen objects go back to the collector before pytest's last collection and its
    summary (hypothesis, first imported there, looks for referrers the freeze hides)."""
    gc.unfreeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    global _watching
    unit = item.get_closest_marker("unit") is not None
    _spawned.clear()
    _watching = unit
    try:
        result = yield
    finally:
        _watching = False
    if unit and _spawned:
        raise AssertionError(
            "a unit test started a process (move it to the integration tier): "
            + "; ".join(_spawned[:3])
        )
    return result
