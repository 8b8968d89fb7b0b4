"""A client written to the specs, not to our server: MCP 2026-07-28 (per-request `_meta`
envelope, no handshake) with the tasks extension (`io.modelcontextprotocol/tasks`), as raw
JSON-RPC lines over a stdio server's pipes. One `RawClient` is one session.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from tests.support.cluster import Cluster

PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class RawClient:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        assert proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, cmd: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> Self:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as err:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=dict(env),
                cwd=cwd,
            )
        return cls(proc)

    def _read(self, out: IO[bytes]) -> None:
        for line in out:
            message = json.loads(line)
            if "id" in message and "method" not in message:  # answers; notifications skipped
                self._answers.put(message)

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, tasks: bool = True
    ) -> dict[str, Any]:
        """The JSON-RPC response (with `result` or `error`) to one request. `tasks`: the
        request names the tasks extension in its capabilities."""
        ident = next(self._ids)
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-task-client", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": (
                {"extensions": {TASKS: {}}} if tasks else {}
            ),
        }
        body = {"jsonrpc": "2.0", "id": ident, "method": method}
        body["params"] = {**(params or {}), "_meta": meta}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(body).encode() + b"\n")
        self.proc.stdin.flush()
        answer = self._answers.get(timeout=120)  # one request at a time: the next answer
        assert answer["id"] == ident, answer
        return answer

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        answer = self.request(method, params, **kw)
        assert "result" in answer, answer
        return answer["result"]

    def call(self, name: str, arguments: dict[str, Any], *, tasks: bool = True) -> Any:
        return self.result("tools/call", {"name": name, "arguments": arguments}, tasks=tasks)

    def poll(
        self,
        task_id: str,
        timeout: float,
        until: Sequence[str] | Callable[[dict[str, Any]], bool] = TERMINAL,
    ) -> list[Any]:
        """Every `tasks/get` answer until the task's status is one of `until` (or `until`
        says yes), honouring its pollIntervalMs; `timeout` bounds a hang."""
        seen: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            got = self.result("tasks/get", {"taskId": task_id})
            seen.append(got)
            if until(got) if callable(until) else got["status"] in until:
                return seen
            assert time.monotonic() < deadline, f"task still {got['status']}: {got}"
            time.sleep(got.get("pollIntervalMs", 1000) / 1000)

    @staticmethod
    def poll_pause() -> None:
        time.sleep(0.2)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def own_tools(cluster: Cluster, allowed_root: Path, *flags: str, **env: str) -> RawClient:
    """`mcp-media mcp` (the own tools) on the cluster's queues (or with `--inline` in its own
    process), files readable under `allowed_root`, as a RawClient session."""
    from tests.support.cluster import ROOT

    return RawClient.start(
        [
            *(sys.executable, "-m", "workers.cli.main", "mcp"),
            *("--allow-root", str(allowed_root), *flags),
        ],
        cluster.env(PYTHONPATH=str(ROOT), **env),
        ROOT,
        cluster.home / "logs" / "mcp.log",
    )
