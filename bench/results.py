"""bench/results.json: one object keyed by benchmark name, plus `_run` (when and how loaded).

Every entry carries its target as `"<value|ratio> <op> <number|baseline>"` (or `"report"`);
`record` checks it, prints the figure beside its measured baseline and remembers a miss,
so `python -m bench` can exit non-zero naming each missed target.
"""

from __future__ import annotations

import json
import operator
import os
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

RESULTS = Path(__file__).resolve().parent / "results.json"
RUN_KEY = "_run"
# A load average above this share of the cores during a suite marks its figures as noisy.
BUSY_LOAD_PER_CORE = 0.5

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "<": operator.lt,
}


class Entry(TypedDict):
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    better: Literal["higher", "lower"]
    # What the baseline is: always a measurement of this run, never a typed figure.
    baseline_of: NotRequired[str]
    met: NotRequired[bool | None]


MISSES: list[str] = []


def check(entry: Entry) -> bool | None:
    """True/False for a target `"<value|ratio> <op> <number|baseline>"`; None for "report"."""
    target = entry["target"].strip()
    if target == "report":
        return None
    try:
        field, op, bound = target.split()
        subject = entry[field]  # type: ignore[literal-required]
        limit = entry["baseline"] if bound == "baseline" else float(bound)
        compare = _OPS[op]
    except (ValueError, KeyError) as exc:
        raise ValueError(f"malformed target {target!r}") from exc
    if subject is None or limit is None:
        return False
    return compare(float(subject), float(limit))


def _load() -> dict[str, Any]:
    if not RESULTS.exists():
        return {}
    data = json.loads(RESULTS.read_text())
    return data if isinstance(data, dict) else {}


def _save(data: dict[str, Any]) -> None:
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)


def _fmt(number: float | None) -> str:
    return "-" if number is None else f"{number:.4g}"


def record(name: str, entry: Entry) -> None:
    """Check one entry, merge it into results.json (atomic rewrite) and print it."""
    met = check(entry)
    entry["met"] = met
    data = _load()
    data[name] = entry
    _save(data)
    line = f"{name}: {_fmt(entry['value'])} {entry['unit']}"
    if entry["baseline"] is not None:
        line += f" vs baseline {_fmt(entry['baseline'])} ({entry.get('baseline_of', '?')})"
    if entry["ratio"] is not None:
        line += f" ratio={_fmt(entry['ratio'])}"
    verdict = {None: "report only", True: "MET", False: "MISSED"}[met]
    line += f" [target {entry['target']}: {verdict}]"
    print(line, flush=True)
    if met is False:
        MISSES.append(_miss_line(name, entry))


def _miss_line(name: str, entry: Any) -> str:
    return (
        f"{name}: {entry['target']} (value {_fmt(entry['value'])}, "
        f"baseline {_fmt(entry['baseline'])}, ratio {_fmt(entry['ratio'])})"
    )


def _missed(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("met") is False


def begin_run(suites: list[str], *, fresh: bool) -> None:
    """Start `_run`; a full run (`fresh`) drops every entry of earlier runs. A run of some
    suites keeps the other suites' entries, and `_run` keeps what it said of them: each
    suite's load and time, and `runs`, when each partial run started and what it ran."""
    data = {} if fresh else _load()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    earlier = data.get(RUN_KEY, {}) if not fresh else {}
    runs = [r for r in earlier.get("runs", []) if not set(r.get("suites", [])) <= set(suites)]
    if earlier and not earlier.get("runs"):
        runs = [{"started_at": earlier.get("started_at"), "suites": earlier.get("suites", [])}]
        runs = [r for r in runs if not set(r["suites"]) <= set(suites)]
    load = {k: v for k, v in earlier.get("load", {}).items() if k not in suites}
    data[RUN_KEY] = {
        "started_at": started,
        "suites": sorted({*suites, *load}),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load": load,
        "runs": [*runs, {"started_at": started, "suites": suites}],
    }
    if earlier.get("caveat") and load:
        data[RUN_KEY]["caveat"] = earlier["caveat"]
    _save(data)


def note_load(suite: str, started: float) -> None:
    """Store the 1-minute load average seen at the end of one suite, with a caveat if busy."""
    data = _load()
    run = data.setdefault(RUN_KEY, {})
    load1 = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    busy = load1 > BUSY_LOAD_PER_CORE * cpus
    run.setdefault("load", {})[suite] = {
        "loadavg_1min_at_end": round(load1, 2),
        "seconds": round(time.perf_counter() - started, 1),
        "busy": busy,
    }
    if busy:
        run["caveat"] = (
            "the machine was busy with other work during this run (see load): absolute "
            "figures are noisy; ratios were measured side by side, alternating, best of N"
        )
    _save(data)


def end_run(failed: list[str]) -> None:
    data = _load()
    run = data.setdefault(RUN_KEY, {})
    run["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    # Every target missed by an entry in the file, this run's or a kept earlier suite's.
    run["missed"] = sorted({*MISSES, *(_miss_line(k, v) for k, v in data.items() if _missed(v))})
    run["failed_suites"] = failed
    _save(data)
