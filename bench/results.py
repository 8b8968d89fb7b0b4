"""bench/results.json: one object keyed by benchmark name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, TypedDict

RESULTS = Path(__file__).resolve().parent / "results.json"


class Entry(TypedDict):
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    better: Literal["higher", "lower"]


def record(name: str, entry: Entry) -> None:
    """Merge one entry into results.json (atomic rewrite) and print it."""
    data: dict[str, Entry] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[name] = entry
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)
    ratio = f" ratio={entry['ratio']:.2f}" if entry["ratio"] is not None else ""
    print(f"{name}: {entry['value']:.3f} {entry['unit']}{ratio} (target {entry['target']})")
