"""How long a worker takes to serve again after redis-server is SIGKILLed and restarted on
the same port: one line per run, both cores burned.

    python -m tests.faults.reconnect --runs 5 --down-for 0 --down-for 2.5

`first_job_s` runs from the broker's return to the first fresh job's result. A figure for
the record (RELIABILITY.md), never an assertion.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.faults import scenarios
from tests.faults.scenarios import CpuBurners
from tests.faults.soak import models_home
from tests.support.cluster import Cluster
from tests.support.fake_openai import FakeOpenAI
from workers.broker.embedded import ensure_embedded, stop_embedded


def run(runs: int, downs: list[float], burners: int, workdir: Path) -> int:
    home = workdir / "home"
    home.mkdir()
    (home / "models").symlink_to(models_home() / "models")
    broker = ensure_embedded(home)
    lost = 0
    with FakeOpenAI() as fake, CpuBurners(burners) as burn:
        print(f"reconnect: runs={runs} down_for={downs} burners={burn.count} pids={burn.pids}")
        cluster = Cluster(home, broker, fake)
        try:
            tag = 0
            for down_for in downs:
                for index in range(1, runs + 1):
                    tag += 1
                    result = scenarios.first_job_after_restart(
                        cluster, workdir, tag, down_for=down_for
                    )
                    lost += result.lost
                    print(f"run={index} {result.line()}", flush=True)
        finally:
            cluster.stop()
            stop_embedded(home)
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.reconnect", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--down-for", type=float, action="append", help="seconds the broker stays down (0)"
    )
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mcp-media-reconnect-"))
    try:
        return run(args.runs, args.down_for or [0.0], args.burners, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
