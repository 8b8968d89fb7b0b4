"""A real `mcp-media up` for tests: its own home and embedded broker, its children by name,
its stderr lines; every wait is on a condition with a bound, never a fixed sleep."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx2

from tests.support.cluster import ROOT
from tests.support.fake_openai import FakeOpenAI
from workers.broker.embedded import Broker, running_embedded, stop_embedded

READY_TIMEOUT = 300.0  # three workers loading their models on two busy cores


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Until `predicate` holds, at most `timeout` seconds: whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def wait_ready(proc: subprocess.Popen[bytes], url: str, seconds: float, log: Path) -> None:
    """Until `url`/readyz answers 200 while `proc` runs, for at most `seconds` (a condition
    to wait for, not a timing assertion); else fail with `log`."""
    deadline = time.monotonic() + seconds
    ready = None
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx2.TransportError):
            ready = httpx2.get(f"{url}/readyz", timeout=5)
            if ready.status_code == 200:
                break
        time.sleep(0.5)
    assert ready is not None and ready.status_code == 200, log.read_text()


def children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = children_of(pid)
    while pending:
        child = pending.pop()
        found.append(child)
        pending.extend(children_of(child))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _role(pid: int) -> str | None:
    """`stt`, `tts`, `vision` for a worker, `api` for serve, from its command line."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in argv]
    if "serve" in args:
        return "api"
    if "--queues" in args:
        return args[args.index("--queues") + 1]
    return None


def node_env(home: Path, fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    """The environment of a node in `home`: no setting of the test's own, vision on `fake`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    base.pop("AUXILIARY_VISION_MODEL", None)
    return {
        **base,
        "MCP_MEDIA_HOME": str(home),
        "MCP_MEDIA_VISION__BASE_URL": fake.base_url,
        "MCP_MEDIA_VISION__API_KEY": "sk-test-not-a-real-key",
        "MCP_MEDIA_VISION__MODEL": "fake-vision",
        "MCP_MEDIA_VISION__TIMEOUT": "3",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def fresh_home(parent: Path, models_home: Path) -> Path:
    """`parent/home`, seeing the prepared models."""
    home = parent / "home"
    home.mkdir()
    (home / "models").symlink_to(models_home / "models")
    return home


class Up:
    """`mcp-media up [--api]` in `home`, started in a session of its own."""

    def __init__(self, home: Path, env: Mapping[str, str], api_port: int | None = None) -> None:
        self.home = home
        self.env = dict(env)
        self.api_port = api_port
        self.stderr = home / "up.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.seen: set[int] = set()  # every descendant seen: none may outlive the test

    def start(self) -> Up:
        cmd = [sys.executable, "-m", "workers.cli.main", "up", "--grace", "20"]
        if self.api_port is not None:
            cmd.append("--api")
            self.env["MCP_MEDIA_API__PORT"] = str(self.api_port)
        with self.stderr.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=out,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def text(self) -> str:
        return self.stderr.read_text(errors="replace")

    def children(self) -> dict[str, int]:
        """Its live children by role."""
        found = {}
        self.seen.update(descendants(self.pid))
        for pid in children_of(self.pid):
            role = _role(pid)
            if role is not None and alive(pid):
                found[role] = pid
        return found

    def ready_count(self, queue: str) -> int:
        log = self.home / "logs" / f"worker-{queue}.log"
        return log.read_text(errors="replace").count(" ready.") if log.exists() else 0

    def wait_ready(
        self, queues: tuple[str, ...] = ("vision", "stt", "tts"), at_least: int = 1
    ) -> None:
        def ready() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.text()
            return all(self.ready_count(q) >= at_least for q in queues)

        assert wait_for(ready, READY_TIMEOUT), self.text()

    def wait_api(self) -> None:
        """Until `serve` says it is ready (/readyz 200)."""

        def ready() -> bool:
            try:
                return httpx2.get(f"http://127.0.0.1:{self.api_port}/readyz", timeout=5).is_success
            except httpx2.TransportError:
                return False

        assert wait_for(ready, READY_TIMEOUT, interval=0.5), self.text()

    def broker(self) -> Broker | None:
        return running_embedded(self.home)

    def restarted(self, what: str) -> int | None:
        """The pid `up` said it restarted `what` as (the last such line), if it did."""
        found = re.findall(rf"restarted {re.escape(what)} as pid (\d+)", self.text())
        return int(found[-1]) if found else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for pid in self.seen:  # left behind (an `up` that was SIGKILLed): ours, by PID
            if alive(pid) and _role(pid) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            stop_embedded(self.home)
