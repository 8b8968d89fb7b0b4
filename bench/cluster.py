"""A private cluster for benches: its own home, embedded broker and worker processes.

`BenchCluster` makes a temporary MCP_MEDIA_HOME (models linked from the prepared home),
starts the embedded redis-server there, starts `mcp-media worker` processes on demand and
stops everything it started on exit. Worker processes and the fake OpenAI-protocol provider
are the test suite's own (`tests/support/`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Self

import redis

from tests.support.cluster import Worker
from workers.broker.embedded import Broker, ensure_embedded, stop_embedded
from workers.core.settings import Settings
from workers.gateways.cluster import MediaClient
from workers.provisioning.models import prepare

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 180.0


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def models_root() -> Path:
    """The prepared models of $MCP_MEDIA_HOME (default `.home`, as `make` uses), made complete."""
    home = Path(os.environ.get("MCP_MEDIA_HOME") or ROOT / ".home")
    prepare(home, log=_log)
    return home / "models"


class BenchCluster:
    """A temporary home shared by the bench (as client) and the workers it starts."""

    def __init__(self, env: Mapping[str, str] | None = None, *, models: bool = False) -> None:
        self.extra_env = dict(env or {})
        self.models = models
        self.home = Path(tempfile.mkdtemp(prefix="mcp-media-bench-"))
        self.broker: Broker | None = None
        self.workers: list[Worker] = []

    def __enter__(self) -> Self:
        try:
            if self.models:
                (self.home / "models").symlink_to(models_root())
            self.broker = ensure_embedded(self.home)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        assert self.broker is not None
        return self.broker.url

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
        base.pop("AUXILIARY_VISION_MODEL", None)
        own = {"MCP_MEDIA_HOME": str(self.home), "MCP_MEDIA_REDIS_URL": self.url}
        return {**base, **own, **self.extra_env, **extra}

    def settings(self, **extra: str) -> Settings:
        return Settings.from_env(self.env(**extra))

    @contextlib.contextmanager
    def client(self, **extra: str) -> Iterator[MediaClient]:
        made = MediaClient.connect(self.settings(**extra))
        try:
            yield made
        finally:
            made.close()

    def redis(self) -> redis.Redis[bytes]:
        return redis.Redis.from_url(self.url)

    def start_worker(self, queues: str, concurrency: int, **extra: str) -> Worker:
        log = self.home / "logs" / f"worker-{queues}-{len(self.workers)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli.main", "worker", "--queues", queues]
        cmd += ["--concurrency", str(concurrency)]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=self.env(**extra),
                start_new_session=True,
            )
        worker = Worker(proc, log, queues)
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    def stop_worker(self, worker: Worker) -> None:
        worker.stop()
        self.workers.remove(worker)

    def cli(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        """`mcp-media ARGS` started in the background (stdout and stderr piped)."""
        return subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=self.env(**extra),
        )

    def close(self) -> None:
        for worker in list(self.workers):
            with contextlib.suppress(Exception):
                worker.stop()
        self.workers.clear()
        if self.broker is not None and self.broker.started:
            stop_embedded(self.home)
        self.broker = None
        shutil.rmtree(self.home, ignore_errors=True)
