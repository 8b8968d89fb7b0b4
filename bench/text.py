"""Hostile text through the TTS text stage (`prepare`) and the whole adversarial set.

Each named input of issue 14 runs in its own child (wall time and peak RSS of the child
over a bare interpreter with the module imported); then every text stage runs over the 810
adversarial 20,000-character inputs of tests/support/hostile_text.py and the slowest input
of each is recorded. `python -m bench text`; `python -m bench.text --root DIR` measures
another checkout's pipelines/ (the figures before a change) without recording.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.results import Entry, record
from tests.support.hostile_text import run_stage, stage_names

ROOT = Path(__file__).resolve().parents[1]
NAMED: dict[str, str] = {
    "newlines_4000_then_x": "'\\n' * 4000 + 'x'",
    "heading_4000_spaces": "'# a' + ' ' * 4000 + 'b'",
    "newlines_20000_then_x": "'\\n' * 19999 + 'x'",
    "heading_20000_spaces": "'# a' + ' ' * 19996 + 'b'",
    "nines_5000": "'9' * 5000",
    "dollars_4400_digits": "'$' + '9' * 4400",
    "digits_4000": "'9' * 4000",
    "prose_20000": "('The quick brown fox jumps over the lazy dog. ' * 450)[:20000]",
}
_CHILD = """
import resource, sys, time
from pipelines.speech.text import prepare
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
text = eval(sys.argv[1])
started = time.perf_counter()
try:
    outcome = f"{len(prepare(text))} sentences"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:90]}"
seconds = time.perf_counter() - started
extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(f"{seconds:.3f}\\t{extra:.1f}\\t{outcome}")
"""


def measure(expr: str, root: Path, timeout: float) -> tuple[float | None, float | None, str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, expr],
            capture_output=True,
            text=True,
            cwd=root,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, None, f"still running at {time.perf_counter() - started:.0f} s (killed)"
    if proc.returncode != 0:
        return None, None, proc.stderr.strip().splitlines()[-1][:120]
    seconds, extra, outcome = proc.stdout.strip().split("\t", 2)
    return float(seconds), float(extra), outcome


def named(root: Path, timeout: float, save: bool) -> None:
    for name, expr in NAMED.items():
        seconds, extra, outcome = measure(expr, root, timeout)
        shown = "killed" if seconds is None else f"{seconds:.3f} s, +{extra:.0f} MiB"
        print(f"tts_text_{name}: {shown}: {outcome}", flush=True)
        if save and seconds is not None and extra is not None:
            record(f"tts_text_{name}_seconds", _entry(seconds, "s", "value <= 2"))
            record(f"tts_text_{name}_extra_rss", _entry(extra, "MiB", "value <= 512"))


def stages(timeout: float) -> None:
    for stage in stage_names():
        report = run_stage(stage, timeout=timeout)
        timed = [r for r in report.runs if r.seconds is not None]
        worst = max(timed, key=lambda r: r.seconds or 0.0)
        hung = len(report.runs) - len(timed)
        print(f"  {stage}: slowest {worst.seconds:.3f} s on {worst.label}", flush=True)
        record(
            f"text_stage_{stage}_slowest_of_810",
            _entry((worst.seconds or 0.0) if not hung else float("inf"), "s", "value <= 2"),
        )


def _entry(value: float, unit: str, target: str) -> Entry:
    return {
        "value": round(value, 3),
        "unit": unit,
        "baseline": None,
        "ratio": None,
        "target": target,
        "better": "lower",
    }


def run() -> None:
    named(ROOT, timeout=60.0, save=True)
    stages(timeout=30.0)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="measure this checkout, record nothing")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.root:
        named(args.root.resolve(), args.timeout, save=False)
        return 0
    run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
