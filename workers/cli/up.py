"""`mcp-media up`: the embedded broker (unless a URL is set) and one worker per queue."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from workers.broker import checked_broker, stop_embedded
from workers.capabilities import QUEUES
from workers.cli.supervisor import (
    Child,
    StopRequested,
    raise_on_signals,
    spawn_worker,
    stop_children,
)
from workers.redis_target import RedisTarget
from workers.settings import Settings


def start_all(
    settings: Settings, queues: tuple[str, ...] = QUEUES, api: bool = False
) -> tuple[list[Child], bool]:
    broker = checked_broker(settings)
    env = dict(os.environ, MCP_MEDIA_REDIS_URL=broker.url, MCP_MEDIA_HOME=str(settings.home))
    log_dir = settings.home / "logs"
    children = [spawn_worker([queue], log_dir, env) for queue in queues]
    sys.stderr.write(
        f"mcp-media: broker {RedisTarget.of(settings, broker.url).where()}"
        f"{' (embedded, started)' if broker.started else ''}\n"
        f"mcp-media: workers {', '.join(c.name for c in children)}; logs in {log_dir}\n"
    )
    if api:
        children.append(spawn_serve(log_dir, env))
        shown = f"[{settings.api.host}]" if ":" in settings.api.host else settings.api.host
        given = settings.api.key.get_secret_value()
        where = "MCP_MEDIA_API__KEY" if given else str(settings.home / "api-key")
        sys.stderr.write(
            f"mcp-media: API http://{shown}:{settings.api.port}/v1, jobs page "
            f"http://{shown}:{settings.api.port}/ (key: {where}; log {log_dir / 'serve.log'})\n"
        )
    return children, broker.started


def spawn_serve(log_dir: Path, env: dict[str, str]) -> Child:
    """`mcp-media serve` beside the workers, on the API settings' host and port."""
    log = log_dir / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return Child("api", proc, log)


def stop_all(settings: Settings, children: list[Child], broker_started: bool, grace: float) -> None:
    stop_children(children, grace)
    if broker_started:
        stop_embedded(settings.home)


def run_up(settings: Settings, grace: float, api: bool = False) -> int:
    raise_on_signals()
    children: list[Child] = []
    started = False
    try:
        children, started = start_all(settings, api=api)
        while True:
            for child in children:
                code = child.proc.poll()
                if code is not None:
                    sys.stderr.write(
                        f"mcp-media: worker {child.name} exited with {code}; see {child.log}\n"
                    )
                    return 1
            time.sleep(0.5)
    except StopRequested as stop:
        sys.stderr.write(f"mcp-media: {stop}: stopping workers (grace {grace:.0f} s)\n")
        return 0
    finally:
        stop_all(settings, children, started, grace)
