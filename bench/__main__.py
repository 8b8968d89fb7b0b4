"""Run every benchmark: `python -m bench [NAME...]`."""

from __future__ import annotations

import sys

from bench import ingest

SUITES = {"ingest": ingest.run}


def main(argv: list[str]) -> int:
    names = argv or list(SUITES)
    for name in names:
        SUITES[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
