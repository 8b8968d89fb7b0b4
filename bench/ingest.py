"""Ingest of a 50 MiB embedded blob vs the fastest one-shot version of the same work.

The baseline is what this environment does fastest without streaming: pybase64 decode
(validate=True) of the whole string + sha256 + write + fsync. It is measured in the same run,
on the same text, alternating with `ingest()` round by round (best of ROUNDS each), and its
peak memory (tracemalloc) is measured the same way. The stdlib one-shot is reported too.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import os
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pybase64

from bench.results import record
from pipelines import CacheLimits, MediaCache, ingest

SIZE = 50 * 1024 * 1024
ROUNDS = 7
MIB = 1024 * 1024


def _one_shot(decode: Callable[[str], bytes], text: str, folder: Path) -> None:
    data = decode(text)
    digest = hashlib.sha256(data).hexdigest()
    path = folder / digest
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _pybase64(text: str) -> bytes:
    return bytes(pybase64.b64decode(text, validate=True))


def _stdlib(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _timed(fn: Callable[[], Any], reset: Callable[[], None]) -> float:
    reset()
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _peak_mib(fn: Callable[[], Any], reset: Callable[[], None]) -> float:
    """Peak traced memory above what was live before `fn` started."""
    reset()
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - before) / MIB


def run() -> None:
    blob = os.urandom(SIZE)
    text = base64.b64encode(blob).decode("ascii")
    del blob
    result = {
        "content": [{"type": "resource", "resource": {"uri": "x://big/report.pdf", "blob": text}}]
    }
    work = Path(tempfile.mkdtemp(prefix="mcp-media-bench-"))
    try:
        cache_root = work / "cache"
        base_dir = work / "baseline"

        def reset() -> None:
            shutil.rmtree(cache_root, ignore_errors=True)
            shutil.rmtree(base_dir, ignore_errors=True)
            base_dir.mkdir()

        cache = MediaCache(cache_root, CacheLimits(max_blob_bytes=SIZE))
        runs: dict[str, Callable[[], Any]] = {
            "ingest": lambda: ingest(result, cache=cache),
            "pybase64": lambda: _one_shot(_pybase64, text, base_dir),
            "stdlib": lambda: _one_shot(_stdlib, text, base_dir),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        for r in range(ROUNDS):  # alternate, and flip the order every round
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                times[name].append(_timed(runs[name], reset))
        best = {name: min(t) for name, t in times.items()}
        print(
            f"  ingest {SIZE // MIB} MiB, seconds per round: "
            + "; ".join(f"{n} {[round(t, 3) for t in ts]}" for n, ts in times.items())
        )
        mib = SIZE / MIB
        record(
            "ingest_50mib_throughput",
            {
                "value": round(mib / best["ingest"], 1),
                "unit": "MiB/s",
                "baseline": round(mib / best["pybase64"], 1),
                "baseline_of": "pybase64 one-shot decode+sha256+write+fsync, same run",
                "ratio": round(best["pybase64"] / best["ingest"], 3),
                "target": "ratio >= 0.9",
                "better": "higher",
            },
        )
        record(
            "ingest_50mib_stdlib_one_shot_throughput",
            {
                "value": round(mib / best["stdlib"], 1),
                "unit": "MiB/s",
                "baseline": round(mib / best["pybase64"], 1),
                "baseline_of": "pybase64 one-shot, same run",
                "ratio": round(best["pybase64"] / best["stdlib"], 3),
                "target": "report",
                "better": "higher",
            },
        )
        ours = _peak_mib(runs["ingest"], reset)
        theirs = _peak_mib(runs["pybase64"], reset)
        record(
            "ingest_50mib_peak_memory",
            {
                "value": round(ours, 2),
                "unit": "MiB",
                "baseline": round(theirs, 2),
                "baseline_of": "tracemalloc peak of the pybase64 one-shot, same run",
                "ratio": round(ours / theirs, 3) if theirs > 0 else None,
                "target": "value <= 16",
                "better": "lower",
            },
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
