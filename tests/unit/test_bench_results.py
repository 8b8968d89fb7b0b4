"""bench/results.json over partial runs: other suites' entries and what `_run` said of them stay."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench import results

pytestmark = pytest.mark.unit


def _entry(value: float, target: str) -> results.Entry:
    return {
        "value": value,
        "unit": "s",
        "baseline": None,
        "ratio": None,
        "target": target,
        "better": "lower",
    }


def test_a_partial_run_keeps_the_other_suites_entries_load_and_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(results, "MISSES", [])
    results.begin_run(["speech", "api"], fresh=True)
    results.record("speech_slow", _entry(3.0, "value <= 2"))
    results.record("api_fast", _entry(1.0, "value <= 2"))
    results.note_load("speech", time.perf_counter())
    results.note_load("api", time.perf_counter())
    results.end_run([])

    monkeypatch.setattr(results, "MISSES", [])
    results.begin_run(["api"], fresh=False)
    results.record("api_fast", _entry(2.5, "value <= 2"))
    results.note_load("api", time.perf_counter())
    results.end_run([])

    data = json.loads((tmp_path / "results.json").read_text())
    run = data["_run"]
    assert data["speech_slow"]["met"] is False and data["api_fast"]["met"] is False
    assert run["suites"] == ["api", "speech"]
    assert set(run["load"]) == {"api", "speech"}
    assert [r["suites"] for r in run["runs"]] == [["speech", "api"], ["api"]]
    assert len(run["missed"]) == 2
    assert any(line.startswith("speech_slow:") for line in run["missed"])

    monkeypatch.setattr(results, "MISSES", [])
    results.begin_run(["speech", "api"], fresh=True)
    results.end_run([])
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data) == {"_run"} and data["_run"]["missed"] == []
