"""A real cluster for tests: the embedded redis-server, real worker processes, and the real
CLI, all sharing one MCP_MEDIA_HOME. Fixtures live in tests/conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.fake_openai import FakeOpenAI
from workers.broker.embedded import Broker
from workers.core.settings import Settings
from workers.gateways.cluster import MediaClient

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 90.0


class Worker:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
        self.proc = proc
        self.log = log
        self.name = name

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.text():
                return
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"worker exited {self.proc.returncode}:\n{self.text()[-3000:]}"
                )
            time.sleep(0.1)
        raise AssertionError(f"worker not ready after {timeout} s:\n{self.text()[-3000:]}")

    def children(self) -> list[int]:
        """The pool children of this worker (prefork), from /proc."""
        pid = self.proc.pid
        try:
            return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return []

    def peak_rss_mib(self) -> dict[int, float]:
        """VmHWM of each pool child, in MiB."""
        peaks: dict[int, float] = {}
        for child in self.children():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{child}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks[child] = int(line.split()[1]) / 1024
        return peaks

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children), as a node loss does."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


class Cluster:
    """One MCP_MEDIA_HOME shared by the test (as client) and its worker processes."""

    def __init__(self, home: Path, broker: Broker, fake: FakeOpenAI) -> None:
        self.home = home
        self.broker = broker
        self.fake = fake
        self.workers: list[Worker] = []
        self.worker_home: Path | None = None  # the workers' own home, when not `home`
        self.env_vars: dict[str, str] = {
            "MCP_MEDIA_HOME": str(home),
            "MCP_MEDIA_REDIS_URL": broker.url,
            "MCP_MEDIA_VISION__BASE_URL": fake.base_url,
            "MCP_MEDIA_VISION__API_KEY": "sk-test-not-a-real-key",
            "MCP_MEDIA_VISION__MODEL": "fake-vision",
            "MCP_MEDIA_VISION__TIMEOUT": "3",
            "MCP_MEDIA_VISION__MAX_CONCURRENCY": "2",
            "MCP_MEDIA_JOBS__CLAIM_TTL": "6",
        }

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
        base.pop("AUXILIARY_VISION_MODEL", None)
        return {**base, **self.env_vars, **extra}

    def settings(self, **extra: str) -> Settings:
        return Settings.from_env(self.env(**extra))

    def client(self, **extra: str) -> MediaClient:
        return MediaClient.connect(self.settings(**extra))

    def start_worker(
        self,
        queues: str = "vision",
        concurrency: int = 4,
        *,
        wait: bool = True,
        entry: Sequence[str] = ("workers.cli.main", "worker"),
        prefix: Sequence[str] = (),
        **extra: str,
    ) -> Worker:
        """`mcp-media worker` (or another module taking the same flags) as a process;
        `prefix`: a command that runs it (as `tests.support.disk.on_tmpfs` makes)."""
        log = self.home / "logs" / f"worker-{queues}-{len(self.workers)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if self.worker_home is not None:
            extra.setdefault("MCP_MEDIA_HOME", str(self.worker_home))
        cmd = [
            *prefix,
            sys.executable,
            "-m",
            *entry,
            "--queues",
            queues,
            "--concurrency",
            str(concurrency),
        ]
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
        if wait:
            worker.wait_ready()
        return worker

    def cli(
        self, *args: str, timeout: float = 120, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "workers.cli.main", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=self.env(**extra),
            timeout=timeout,
            check=False,
        )

    def cli_json(self, *args: str, **extra: str) -> Any:
        return self.cli_json_exit(0, *args, **extra)

    def cli_json_exit(self, code: int, /, *args: str, **extra: str) -> Any:
        """The command's JSON, asserting its exit (1: a job that failed, 75: try again)."""
        proc = self.cli(*args, "--json", timeout=120, **extra)
        assert proc.returncode == code, (proc.returncode, proc.stderr)
        return json.loads(proc.stdout)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()


class SplitCluster(Cluster):
    """Shared nothing but Redis and an S3 bucket: the test (the producer) uses `home`, every
    worker it starts runs in `worker_home`, a home of its own."""

    def __init__(
        self, home: Path, worker_home: Path, broker: Broker, fake: FakeOpenAI, s3: Mapping[str, str]
    ) -> None:
        super().__init__(home, broker, fake)
        self.worker_home = worker_home
        self.env_vars.update(s3)


def write_result(path: Path, blocks: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text(json.dumps({"content": list(blocks)}))
    return path
