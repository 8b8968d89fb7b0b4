"""A private cluster for benches: its own home, embedded broker and worker processes.

`BenchCluster` makes a temporary MCP_MEDIA_HOME (models linked from the prepared home),
starts the embedded redis-server there, starts `mcp-media worker` processes on demand and
stops everything it started on exit. `FakeProvider` is a minimal OpenAI-protocol
chat-completions endpoint with a fixed latency and a request counter.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import redis

from workers.broker import Broker, ensure_embedded, stop_embedded
from workers.client import MediaClient
from workers.models import prepare
from workers.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 180.0


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def models_root() -> Path:
    """The prepared models of $MCP_MEDIA_HOME (default `.home`, as `make` uses), made complete."""
    home = Path(os.environ.get("MCP_MEDIA_HOME") or ROOT / ".home")
    prepare(home, log=_log)
    return home / "models"


class FakeProvider:
    """POST .../chat/completions answered after `latency` seconds; counts requests."""

    def __init__(self, latency: float = 0.0, reply: str = "A test image.") -> None:
        self.latency = latency
        self.reply = reply
        self.requests = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def count(self) -> int:
        with self._lock:
            return self.requests

    def answer(self) -> bytes:
        with self._lock:
            self.requests += 1
            latency = self.latency
        if latency:
            self._stopping.wait(latency)
        message = {"role": "assistant", "content": self.reply}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "bench-vision",
            "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return json.dumps(body).encode()


def _handler_for(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.rstrip("/").endswith("/chat/completions"):
                status, data = 200, fake.answer()
            else:
                status, data = 404, b'{"error": {"message": "not found"}}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class Worker:
    """One `mcp-media worker` process (its own session: the group holds its pool children)."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
        self.proc = proc
        self.log = log
        self.name = name

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"worker {self.name} not ready (exit {self.proc.poll()}):\n{tail}")

    def children(self) -> list[int]:
        pid = self.proc.pid
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            return []
        return [int(part) for part in text.split()]

    def peak_rss_mib(self) -> dict[int, float]:
        """VmHWM of each pool child, in MiB."""
        peaks: dict[int, float] = {}
        for child in self.children():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{child}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks[child] = int(line.split()[1]) / 1024
        return peaks

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


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
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(self.env(**extra))
            return Settings()
        finally:
            os.environ.clear()
            os.environ.update(saved)

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
        cmd = [sys.executable, "-m", "workers.cli", "worker", "--queues", queues]
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
            [sys.executable, "-m", "workers.cli", *args],
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
