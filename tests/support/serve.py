"""`mcp-media serve` as a real process on a free loopback port, for the API and page tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import redis
from openai import OpenAI

from tests.support.cluster import ROOT, Cluster
from tests.support.fake_openai import FakeOpenAI
from tests.support.net import free_port, wait_for_port

DETERMINISTIC_VOICE = {"MCP_MEDIA_TTS__NOISE_SCALE": "0", "MCP_MEDIA_TTS__NOISE_SCALE_W": "0"}


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT
    key: str
    proc: subprocess.Popen[bytes]
    log: Path
    clients: list[OpenAI] = field(default_factory=list)

    def openai(self, *, key: str | None = None, **options: Any) -> OpenAI:
        """The real `openai` client on this server (no retries), closed when `serve` ends: a
        client left to the garbage collector closes its sockets in whatever order a cycle is
        collected, and a socket collected first warns in some later test."""
        options.setdefault("max_retries", 0)
        api = OpenAI(base_url=f"{self.url}/v1", api_key=key or self.key, **options)
        self.clients.append(api)
        return api


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
    clients: list[OpenAI] = []
    try:
        wait_for_port(port, proc, log)
        key = env.get("MCP_MEDIA_API__KEY") or (cluster.home / "api-key").read_text().strip()
        yield Served(f"http://127.0.0.1:{port}", key, proc, log, clients)
    finally:
        for api in clients:
            api.close()
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def speech_door(
    home: Path,
    broker: Any,
    models_home: Path,
    workers: Mapping[str, int],
    **env: str,
) -> Iterator[tuple[Cluster, Served, OpenAI]]:
    """A fresh cluster on an emptied `broker` with the prepared models, one worker per entry of
    `workers` (queue -> processes), `serve`, and the real `openai` client pointed at it."""
    client = redis.Redis.from_url(broker.url)
    client.flushall()
    client.close()
    with FakeOpenAI() as fake:
        cluster = Cluster(home, broker, fake)
        cluster.home.mkdir(parents=True)
        (cluster.home / "models").symlink_to(models_home / "models")
        cluster.env_vars.update(env)
        try:
            for queue, processes in workers.items():
                cluster.start_worker(queue, concurrency=processes)
            with serve(cluster) as served:
                yield cluster, served, served.openai()
        finally:
            cluster.stop()


def speech_events(served: Served, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of one `/v1/audio/speech` request (`stream_format` sse)."""
    events = []
    with httpx2.stream(
        "POST", f"{served.url}/v1/audio/speech", json=dict(body), timeout=300,
        headers={"Authorization": f"Bearer {served.key}"},
    ) as response:  # fmt: skip
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events
