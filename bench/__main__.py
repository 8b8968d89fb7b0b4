"""Run every benchmark: `python -m bench [NAME...]`."""

from __future__ import annotations

import sys

from bench import ingest, jobs, speech, text

SUITES = {"ingest": ingest.run, "jobs": jobs.run, "speech": speech.run, "text": text.run}


def main(argv: list[str]) -> int:
    names = argv or list(SUITES)
    unknown = [name for name in names if name not in SUITES]
    if unknown:
        sys.stderr.write(f"unknown benchmark(s) {unknown}; choose from {', '.join(SUITES)}\n")
        return 2
    for name in names:
        SUITES[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
