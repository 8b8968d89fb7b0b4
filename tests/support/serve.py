"""`mcp-media serve` as a real process on a free loopback port, for the API and page tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster import ROOT, Cluster
from tests.support.net import free_port, wait_for_port


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT
    key: str
    proc: subprocess.Popen[bytes]
    log: Path


@contextmanager
def serve(cluster: Cluster, *args: str, prefix: Sequence[str] = (), **env: str) -> Iterator[Served]:
    """`prefix`: a command that runs the server (as `tests.support.disk.on_tmpfs` makes)."""
    port = free_port()
    log = cluster.home / "logs" / f"serve-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "workers.cli.main", "serve", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*prefix, *command],
            cwd=ROOT,
            env=cluster.env(**env),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)
        key = env.get("MCP_MEDIA_API__KEY") or (cluster.home / "api-key").read_text().strip()
        yield Served(f"http://127.0.0.1:{port}", key, proc, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
