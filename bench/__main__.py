"""Run every benchmark: `python -m bench [NAME...]`.

Exits 1 when any target is missed (each one is named) or a suite fails, 2 on bad usage.
A full run (no names) rewrites bench/results.json from scratch.
"""

from __future__ import annotations

import sys
import time
import traceback

from bench import (
    admission,
    api,
    digest,
    ingest,
    jobs,
    kokoro,
    lanes,
    live_lanes,
    long_audio,
    mcp,
    nodes,
    proxy_ready,
    quality,
    realtime,
    reprocess_plan,
    results,
    speech,
    text,
    words,
    wyoming,
)

SUITES = {
    "ingest": ingest.run,
    "jobs": jobs.run,
    "nodes": nodes.run,
    "speech": speech.run,
    "mcp": mcp.run,
    "text": text.run,
    "api": api.run,
    "admission": admission.run,
    "lanes": lanes.run,
    "live_lanes": live_lanes.run,
    "live_lanes_voice": live_lanes.run_voice,
    "quality": quality.run,
    "kokoro": kokoro.run,
    "words": words.run,
    "reprocess_plan": reprocess_plan.run,
    "digest": digest.run,
    "proxy_ready": proxy_ready.run,
    "wyoming": wyoming.run,
    "long_audio": long_audio.run,
    "realtime": realtime.run,
}


def main(argv: list[str]) -> int:
    names = argv or list(SUITES)
    unknown = [name for name in names if name not in SUITES]
    if unknown:
        sys.stderr.write(f"unknown benchmark(s) {unknown}; choose from {', '.join(SUITES)}\n")
        return 2
    results.begin_run(names, fresh=not argv)
    failed: list[str] = []
    for name in names:
        started = time.perf_counter()
        try:
            SUITES[name]()
        except Exception:
            traceback.print_exc()
            failed.append(name)
        results.note_load(name, started)
    results.end_run(failed)
    if results.MISSES or failed:
        print("\nbench: FAILED", file=sys.stderr)
        for miss in results.MISSES:
            print(f"  missed target  {miss}", file=sys.stderr)
        for name in failed:
            print(f"  suite crashed  {name}", file=sys.stderr)
        return 1
    print("\nbench: every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
