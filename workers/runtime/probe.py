"""`python -m workers.runtime.probe QUEUE...`: load the engines of some queues and run their probes.

Run by `mcp-media worker` in a short-lived child before the worker consumes anything, so
a broken model stops the start with a clear message instead of failing every job.
"""

from __future__ import annotations

import sys
import time

from pipelines.errors import MediaError
from workers.jobs.inline import local_resources
from workers.jobs.stages import for_queue
from workers.settings import Settings


def main(queues: list[str]) -> int:
    resources = local_resources(Settings())
    report = []
    for queue in queues:
        started = time.monotonic()
        try:
            for_queue(queue).probe(resources)
        except (MediaError, OSError, RuntimeError) as exc:
            sys.stderr.write(f"{queue}: {type(exc).__name__}: {exc}\n")
            return 1
        report.append(f"{queue} ready in {time.monotonic() - started:.2f} s")
    sys.stdout.write("; ".join(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
