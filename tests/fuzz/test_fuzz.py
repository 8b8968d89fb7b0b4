"""A small fuzz run inside `make test`; `python -m tests.fuzz.fuzz_ingest` runs the big one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.fuzz_ingest import corpus_seeds, one_input, run, summary

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SMALL = 2000


def test_small_fuzz_run_breaks_no_invariant() -> None:
    report = run(SMALL, seed=1, jobs=1, wipe_every=250)
    assert report.inputs == SMALL
    # The mutations reach every path: refused input, clean results and markers.
    assert report.outcomes["invalid"] > SMALL // 10
    assert report.outcomes["clean"] > SMALL // 10
    assert report.outcomes["markers"] > SMALL // 10
    assert {"bad_base64", "not_image", "not_audio", "unsupported_block"} <= set(report.markers)
    assert report.failures == 0, summary(report, 0.0)


def test_inputs_are_reproducible_by_seed_and_index() -> None:
    seeds = corpus_seeds()
    assert len(seeds) > 40
    # Mapping inputs may nest beyond the recursion limit: compare the serialised ones.
    first = [one_input(seeds, 7, i) for i in range(40)]
    again = [one_input(seeds, 7, i) for i in range(40)]
    other = [one_input(seeds, 8, i) for i in range(40)]
    same = [a == b for a, b in zip(first, again, strict=True) if isinstance(a, str | bytes)]
    assert len(same) > 30 and all(same)
    assert sum(a == b for a, b in zip(first, other, strict=True) if isinstance(a, str | bytes)) < 5


@pytest.mark.integration  # starts a process
def test_command_line_prints_its_count_and_exit_code_follows_failures() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.fuzz_ingest", "--count", "300", "--jobs", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    match = re.match(r"fuzz: (\d+) inputs, (\d+) failures, [\d.]+ s$", proc.stdout.splitlines()[0])
    assert match, proc.stdout + proc.stderr
    assert int(match.group(1)) == 300
    assert proc.returncode == (1 if int(match.group(2)) else 0)
