"""`mcp-media up`: the embedded broker (unless a URL is set) and one worker per queue, kept
running: a process that dies is started again (workers.cli.restarts)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from workers.broker.embedded import Broker, checked_broker, stop_embedded
from workers.broker.target import RedisTarget
from workers.cli.restarts import BrokerKeeper, Supervised
from workers.cli.supervisor import (
    Child,
    StopRequested,
    raise_on_signals,
    spawn_worker,
    stop_children,
)
from workers.core.capabilities import QUEUES
from workers.core.settings import Settings
from workers.runtime.lifeline import dies_with_this_process

TICK = 0.5


def start_all(
    settings: Settings, queues: tuple[str, ...] = QUEUES, api: bool = False
) -> tuple[list[Child], bool]:
    children, broker, _env = _start(settings, queues, api)
    return children, broker.started


def _start(
    settings: Settings, queues: tuple[str, ...], api: bool
) -> tuple[list[Child], Broker, dict[str, str]]:
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
    return children, broker, env


def spawn_serve(log_dir: Path, env: dict[str, str]) -> Child:
    """`mcp-media serve` beside the workers, on the API settings' host and port."""
    log = log_dir / "serve.log"
    start = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=dies_with_this_process(),
        )
    return Child("api", proc, log, start)


def stop_all(settings: Settings, children: list[Child], broker_started: bool, grace: float) -> None:
    stop_children(children, grace)
    if broker_started:
        stopped = stop_embedded(settings.home)
        if stopped is not None and stopped.lost:
            sys.stderr.write(f"mcp-media: {stopped.lost}\n")


def _supervised(children: list[Child], env: dict[str, str], log_dir: Path) -> list[Supervised]:
    """Each child with how to start it again; `env` is read at each start (the broker's URL
    changes if it had to come back on another port)."""

    def serve() -> Child:
        return spawn_serve(log_dir, env)

    def worker(queues: list[str]) -> Callable[[], Child]:
        return lambda: spawn_worker(queues, log_dir, env)

    slots = []
    for child in children:
        if child.name == "api":
            slots.append(Supervised("api", serve, child))
        else:
            slots.append(Supervised("worker", worker(child.name.split("+")), child))
    return slots


def run_up(settings: Settings, grace: float, api: bool = False) -> int:
    raise_on_signals()
    slots: list[Supervised] = []
    keeper: BrokerKeeper | None = None
    started = False
    try:
        children, broker, env = _start(settings, QUEUES, api)
        started = broker.started
        slots = _supervised(children, env, settings.home / "logs")
        if not settings.redis_url:
            keeper = BrokerKeeper(settings.home, broker)
        while True:
            now = time.monotonic()
            if keeper is not None and keeper.tend(now):
                env["MCP_MEDIA_REDIS_URL"] = keeper.broker.url
                sys.stderr.write("mcp-media: the broker moved: restarting every process\n")
                stop_children([slot.child for slot in slots], grace)
            for slot in slots:
                slot.tend(now)
            time.sleep(TICK)
    except StopRequested as stop:
        sys.stderr.write(f"mcp-media: {stop}: stopping workers (grace {grace:.0f} s)\n")
        return 0
    finally:
        if keeper is not None:
            started = started or keeper.started
        stop_all(settings, [slot.child for slot in slots], started, grace)
