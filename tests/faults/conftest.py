"""Fault-injection fixtures: a node with its own embedded broker, spoken sentences, the
report of each scenario, and RSS sampling. The scenarios themselves are in scenarios.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.faults.doors import mount_tmpfs, unmount
from tests.faults.scenarios import Outcome, spoken_sentences
from tests.support.cluster import ROOT, Cluster, SplitCluster, Worker
from tests.support.fake_openai import FakeOpenAI
from tests.support.net import free_port
from tests.support.seaweed import SeaweedS3
from tests.support.up import Up, fresh_home, node_env
from workers.broker.embedded import ensure_embedded, stop_embedded

REPORT = ROOT / "tests" / "faults" / "last_run.jsonl"


@pytest.fixture
def node(tmp_path: Path, fake_openai: FakeOpenAI, models_home: Path) -> Iterator[Cluster]:
    """A whole node: its own embedded redis-server (which a scenario may kill), models."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(models_home / "models")
    broker = ensure_embedded(home)
    cluster = Cluster(home, broker, fake_openai)
    yield cluster
    cluster.stop()
    stop_embedded(home)


@pytest.fixture
def split_node(
    tmp_path: Path, fake_openai: FakeOpenAI, models_home: Path, s3_server: SeaweedS3
) -> Iterator[SplitCluster]:
    """The same node split in two homes that share only its broker and an S3 bucket: the
    test submits from one, the workers run in the other (which holds the models)."""
    home, worker_home = tmp_path / "home", tmp_path / "worker-home"
    for folder in (home, worker_home):
        folder.mkdir()
    (worker_home / "models").symlink_to(models_home / "models")
    broker = ensure_embedded(home)
    cluster = SplitCluster(home, worker_home, broker, fake_openai, s3_server.env(tmp_path.name))
    yield cluster
    cluster.stop()
    stop_embedded(home)


@pytest.fixture
def up_node(tmp_path: Path, fake_openai: FakeOpenAI, models_home: Path) -> Iterator[Up]:
    """`mcp-media up --api` in a home of its own: its own embedded broker, three workers and
    `serve`, every one of them `up`'s to restart."""
    home = fresh_home(tmp_path, models_home)
    running = Up(home, node_env(home, fake_openai), api_port=free_port()).start()
    try:
        running.wait_ready()
        running.wait_api()
        yield running
    finally:
        running.stop()


@pytest.fixture
def up_on_small_disk(tmp_path: Path, fake_openai: FakeOpenAI, models_home: Path) -> Iterator[Up]:
    """`up_node` with its home on a 20 MB tmpfs, which a scenario fills."""
    home = tmp_path / "home"
    home.mkdir()
    failed = mount_tmpfs(home, "20m")
    assert failed is None, f"a 20 MB tmpfs needs root (CAP_SYS_ADMIN): {failed}"
    running = None
    try:
        (home / "models").symlink_to(models_home / "models")
        running = Up(home, node_env(home, fake_openai), api_port=free_port()).start()
        running.wait_ready()
        running.wait_api()
        yield running
    finally:
        if running is not None:
            running.stop()
        unmount(home)


@pytest.fixture(scope="session")
def spoken(models_home: Path) -> tuple[list[np.ndarray], int]:
    return spoken_sentences(models_home)


def report(result: Outcome) -> None:
    """Print the scenario's line in the terminal summary and append it to last_run.jsonl."""
    _LINES.append(result.line())
    with REPORT.open("a") as out:
        out.write(json.dumps(result.to_json()) + "\n")


_LINES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The scenario lines are the suite's output: print them after the results."""
    if _LINES:
        terminalreporter.section("fault scenarios")
        for line in _LINES:
            terminalreporter.write_line(line)


def descendants(pid: int) -> list[int]:
    found = [pid]
    for current in found:
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found.extend(int(c) for c in children)
    return found


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Peak RSS of any single process under the given workers, sampled every 0.2 s."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for worker in self.workers:
                for pid in descendants(worker.proc.pid):
                    self.peak[worker.name] = max(self.peak.get(worker.name, 0.0), rss_mib(pid))
