"""Where the Wyoming door listens (`tcp://`, `unix://`, `stdio://`), and its connections.

Wyoming has no authentication: whoever reaches the port can spend the workers' time. So a
TCP address off loopback is refused unless the caller says so (`allow_remote`), and then
logged as exposed; a Unix socket is made 0600 (its owner only). Every connection is bounded
(`Limits`): past `connections` open ones, a new one is told so and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlparse

from wyoming.event import async_write_event

from pipelines.outcomes import Outcome
from workers.core.outcomes import Failure
from workers.doors.listen import ListenError, check_free, is_loopback
from workers.doors.wyoming.connection import Connection, Door, drain
from workers.doors.wyoming.discovery import Announcement, announce
from workers.doors.wyoming.outcomes import error_event

log = logging.getLogger(__name__)

REFUSED_DRAIN_SECONDS = 0.5  # a connection past the count: brief, so a flood holds little


class Scheme(StrEnum):
    TCP = "tcp"
    UNIX = "unix"
    STDIO = "stdio"


@dataclass(frozen=True, slots=True)
class Address:
    scheme: Scheme
    host: str = ""
    port: int = 0
    path: str = ""

    @classmethod
    def parse(cls, uri: str) -> Address:
        found = urlparse(uri)
        if found.scheme == Scheme.TCP:
            try:
                port = found.port
            except ValueError:
                port = None
            if not found.hostname or port is None:
                raise ListenError(f"{uri!r}: a tcp:// address needs a host and a port")
            return cls(Scheme.TCP, found.hostname, port)
        if found.scheme == Scheme.UNIX:
            path = found.path or found.netloc
            if not path:
                raise ListenError(f"{uri!r}: a unix:// address needs a socket path")
            return cls(Scheme.UNIX, path=path)
        if found.scheme == Scheme.STDIO:
            return cls(Scheme.STDIO)
        raise ListenError(f"{uri!r}: use tcp://HOST:PORT, unix://PATH or stdio://")

    @property
    def remote(self) -> bool:
        """Reachable from other machines: a TCP address that is not loopback."""
        return self.scheme is Scheme.TCP and not is_loopback(self.host)

    def __str__(self) -> str:
        if self.scheme is Scheme.TCP:
            host = f"[{self.host}]" if ":" in self.host else self.host
            return f"tcp://{host}:{self.port}"
        return f"unix://{self.path}" if self.scheme is Scheme.UNIX else "stdio://"


def check_address(address: Address, allow_remote: bool) -> str:
    """One line for the log saying what the address exposes; `ListenError` for an address
    off loopback without `allow_remote`, or one that is taken."""
    if address.remote and not allow_remote:
        raise ListenError(
            f"{address} is reachable from other machines and Wyoming has no authentication:"
            " anyone who reaches it could transcribe and synthesize on your workers; listen"
            " on 127.0.0.1 (or a unix:// socket), or pass --allow-remote to expose it anyway"
        )
    if address.scheme is Scheme.TCP:
        check_free(address.host, address.port)
        if address.remote:
            return (
                f"EXPOSED: {address} takes Wyoming connections from any machine that reaches"
                " it, without authentication (speech to text and text to speech on the"
                " workers); keep it behind a firewall"
            )
        return f"{address} takes Wyoming connections from this machine only"
    if address.scheme is Scheme.UNIX:
        _clear_socket(Path(address.path))
        return f"{address} takes Wyoming connections from this user only (mode 0600)"
    return "Wyoming on standard input and output"


def _clear_socket(path: Path) -> None:
    """A stale socket file is removed; a live one, or any other file, is refused."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ListenError(f"{path} exists and is not a socket: choose another path")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink(missing_ok=True)  # nobody listens there any more
            return
    raise ListenError(f"{path}: another server listens there")


async def _connected(
    door: Door, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    task = asyncio.current_task()
    assert task is not None
    if len(door.open) >= door.limits.connections:
        failure = Failure(
            Outcome.UNAVAILABLE,
            f"this server holds {door.limits.connections} connections already",
        )
        with contextlib.suppress(ConnectionError, OSError):
            await async_write_event(error_event(failure), writer)
            await drain(reader, writer, REFUSED_DRAIN_SECONDS)
            writer.close()
        return
    door.open.add(task)
    try:
        await Connection(door, reader, writer).run()
    finally:
        door.open.discard(task)


async def _stdio(door: Door) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=door.limits.header_bytes)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(sys.stdout.fileno(), "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    await Connection(door, reader, writer).run()


async def serve(door: Door, address: Address, zeroconf: str = "") -> None:
    """Take connections until SIGTERM or SIGINT (stdio: until its input ends); a TCP
    address is announced over zeroconf under the name `zeroconf` when one is given."""
    await door.catalog.refresh()  # the first describe is answered from it at once
    door.catalog.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    limit = door.limits.header_bytes

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connected(door, reader, writer)

    server: asyncio.AbstractServer | None = None
    announced: Announcement | None = None
    try:
        if address.scheme is Scheme.STDIO:
            work = asyncio.ensure_future(_stdio(door))
            waiting = asyncio.ensure_future(stop.wait())
            await asyncio.wait({work, waiting}, return_when=asyncio.FIRST_COMPLETED)
            for task in (work, waiting):
                task.cancel()
            return
        if address.scheme is Scheme.TCP:
            server = await asyncio.start_server(
                connected, address.host, address.port, limit=limit, reuse_address=True
            )
            if zeroconf:
                announced = await announce(zeroconf, address.host, address.port)
        else:
            old = os.umask(0o177)  # the socket is born 0600: no moment open to others
            try:
                server = await asyncio.start_unix_server(connected, address.path, limit=limit)
            finally:
                os.umask(old)
        await stop.wait()
    finally:
        if announced is not None:
            await announced.close()
        if server is not None:
            server.close()
        for task in list(door.open):
            task.cancel()
        await asyncio.gather(*door.open, return_exceptions=True)
        await door.catalog.stop()
        if address.scheme is Scheme.UNIX:
            with contextlib.suppress(OSError):
                os.unlink(address.path)
