"""Fault-injection fixtures: a node with its own embedded broker, distinct speech clips,
result accounting from the workers' own log lines, and RSS sampling."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pipelines.speech.audio import write_wav
from pipelines.speech.config import TtsConfig
from pipelines.speech.tts import load_tts
from tests.support.cluster import ROOT, Cluster, Worker
from tests.support.fake_openai import FakeOpenAI
from workers.broker import ensure_embedded, stop_embedded

REPORT = ROOT / "tests" / "faults" / "last_run.jsonl"
_STORED = re.compile(r"stored \w+ result for (\S+) \(job ")
SENTENCES = [
    "The quarterly report is attached to this message.",
    "Please check the numbers in the second table before Friday.",
    "We moved the team meeting to the large room on the third floor.",
    "Remember to renew the parking permits at the front desk.",
]


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


@pytest.fixture(scope="session")
def spoken(models_home: Path) -> tuple[list[np.ndarray], int]:
    voice = load_tts(
        TtsConfig(
            models_home / "models" / "piper-en_US-joe-medium", noise_scale=0.0, noise_scale_w=0.0
        )
    )
    parts = []
    for sentence in SENTENCES:
        speech = voice.synthesize(sentence)
        assert speech.samples is not None
        parts.append(speech.samples)
    return parts, voice.sample_rate


def long_clip(
    spoken: tuple[list[np.ndarray], int], index: int, path: Path, repeats: int = 3
) -> Path:
    """A distinct clip of `repeats` x the four sentences, gaps varying with `index`."""
    parts, rate = spoken
    gap = np.zeros(int(rate * (0.3 + 0.05 * index)), dtype=np.float32)
    order = parts[index % 4 :] + parts[: index % 4]
    pieces = [piece for _ in range(repeats) for sentence in order for piece in (sentence, gap)]
    return write_wav(path, np.concatenate(pieces), rate)


def stored_counts(workers: list[Worker]) -> Counter[str]:
    """How many times each result key was computed and stored, from every worker's log."""
    counts: Counter[str] = Counter()
    for worker in workers:
        counts.update(_STORED.findall(worker.text()))
    return counts


def report(
    name: str,
    *,
    submitted: int,
    completed: int,
    duplicated: int,
    max_latency: float,
    **extra: object,
) -> None:
    lost = submitted - completed
    line = (
        f"{name}: submitted={submitted} completed={completed} lost={lost} "
        f"duplicated={duplicated} max_latency={max_latency:.1f}s"
        + "".join(f" {k}={v}" for k, v in extra.items())
    )
    _LINES.append(line)
    with REPORT.open("a") as out:
        out.write(
            json.dumps(
                {
                    "scenario": name,
                    "submitted": submitted,
                    "completed": completed,
                    "lost": lost,
                    "duplicated": duplicated,
                    "max_latency_s": round(max_latency, 1),
                    **extra,
                }
            )
            + "\n"
        )


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


def start_fault_worker(cluster: Cluster, queues: str, concurrency: int) -> Worker:
    """The production worker plus a task that kills its own process (tests/support)."""
    return cluster.start_worker(queues, concurrency, entry=("tests.support.fault_worker",))


def wait_for(predicate: object, timeout: float, interval: float = 0.05) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
