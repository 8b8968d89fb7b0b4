"""What the hostile runs of one door (`wyoming_hostile`, `realtime_hostile`) share: the door
process's memory, the report's lines, and the command line that prints them."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

Measure = Callable[[int, int, Path], dict[str, object]]


def memory(proc: subprocess.Popen[bytes]) -> dict[str, float]:
    """VmRSS and VmHWM (its peak so far) of the door's process, in MiB."""
    if proc.poll() is not None:
        raise SystemExit(f"the door under test died (exit {proc.returncode})")
    found = {}
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = round(int(value.split()[0]) / 1024, 1)
    return found


def figures(
    unit: str, count: int, started: float, answers: Counter[str], slowest: float,
    before: dict[str, float], after: dict[str, float],
) -> dict[str, object]:  # fmt: skip
    """One kind's figures: `count` connections or sessions (`unit`) from `started` on."""
    return {
        unit: count,
        "per_s": round(count / (time.perf_counter() - started), 1),
        "answers": dict(sorted(answers.items())),
        "slowest_s": round(slowest, 3),
        "memory_before": before,
        "memory_after": after,
    }


def lines(door: str, width: int, report: dict[str, object], after: str, label: str) -> list[str]:
    """A line a kind (answers, rate, slowest, memory), then `report[after]` under `label`
    with the door's memory over every kind."""
    kinds = report["kinds"]
    assert isinstance(kinds, dict)
    out = []
    for name, got in kinds.items():
        before, end_of_kind = got["memory_before"], got["memory_after"]
        out.append(
            f"{door} {name:{width}} {got['answers']}  {got['per_s']}/s  slowest {got['slowest_s']}"
            f" s  RSS {before['VmRSS']} -> {end_of_kind['VmRSS']} MiB"
            f" (peak {end_of_kind['VmHWM']})"
        )
    start, end = report["memory_start"], report["memory_end"]
    assert isinstance(start, dict) and isinstance(end, dict)
    out.append(
        f"{door} {label} afterwards: {report[after]}  RSS {start['VmRSS']} -> "
        f"{end['VmRSS']} MiB over every kind (peak {end['VmHWM']})"
    )
    return out


def main(
    door: str, measure: Measure, report_lines: Callable[[dict[str, object]], list[str]],
    after: str, served: str,
) -> int:  # fmt: skip
    """`--count` and `--concurrency`, a fresh home for the run, its lines printed; exit 2 when
    the door no longer answers as `served` afterwards."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix=f"{door}-hostile-"))
    try:
        report = measure(args.count, args.concurrency, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    for said in report_lines(report):
        print(said)
    return 0 if report[after] == served else 2
