"""Ingest of a 50 MiB embedded blob vs the stdlib baseline of the same work, same run."""

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

from bench.results import record
from pipelines import CacheLimits, MediaCache, ingest

SIZE = 50 * 1024 * 1024
ROUNDS = 5


def _baseline(text: str, folder: Path) -> None:
    data = base64.b64decode(text)
    digest = hashlib.sha256(data).hexdigest()
    path = folder / digest
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _best(fn: Callable[[], Any], reset: Callable[[], None]) -> float:
    times = []
    for _ in range(ROUNDS):
        reset()
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


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
        t_ingest = _best(lambda: ingest(result, cache=cache), reset)
        t_base = _best(lambda: _baseline(text, base_dir), reset)
        mib = SIZE / (1024 * 1024)
        record(
            "ingest_50mib_throughput",
            {
                "value": round(mib / t_ingest, 1),
                "unit": "MiB/s",
                "baseline": round(mib / t_base, 1),
                "ratio": round(t_base / t_ingest, 3),
                "target": ">= 0.8",
                "better": "higher",
            },
        )
        reset()
        gc.collect()
        tracemalloc.start()
        base_current, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        ingest(result, cache=cache)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        added = (peak - base_current) / (1024 * 1024)
        record(
            "ingest_50mib_peak_memory",
            {
                "value": round(added, 2),
                "unit": "MiB",
                "baseline": round(SIZE / (1024 * 1024), 1),
                "ratio": round(added / mib, 3),
                "target": "<= 16",
                "better": "lower",
            },
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
