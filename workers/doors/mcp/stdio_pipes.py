"""stdin and stdout of the stdio door read and written on the event loop, without threads.

The SDK's stdio transport reads each line and writes (then flushes) each message in a worker
thread: three thread hand-offs per call, each waiting for a core on a busy machine. When
the wire is a pipe or a socket (as an MCP client starts us), the loop waits for the
descriptor itself: a line is read, and a message written, as soon as the descriptor is
ready, by the task that wants it. Anything else (a file, a terminal, /dev/null) keeps the
SDK's threads.

Lines are decoded as the SDK's text wrapper decodes them: UTF-8 with replacement, universal
newlines (`\\r\\n` and `\\r` read as `\\n`), the last line without its newline at the end.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

READ_BYTES = 64 * 1024


def is_pipe(fd: int) -> bool:
    """A pipe or a socket: what the event loop can wait on."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """The lines of a pipe, read when it is readable (never blocking the loop)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True
        )

    async def __aiter__(self) -> AsyncIterator[str]:
        parts: list[str] = []
        while True:
            await anyio.wait_readable(self.fd)
            try:
                data = os.read(self.fd, READ_BYTES)  # readable: returns what is there at once
            except BlockingIOError:  # one socket for stdin and stdout: non-blocking too
                continue
            text = self._decoder.decode(data, final=not data)
            while (end := text.find("\n")) >= 0:
                parts.append(text[: end + 1])
                yield "".join(parts)
                parts.clear()
                text = text[end + 1 :]
            if text:
                parts.append(text)
            if not data:
                if parts:
                    yield "".join(parts)
                return


class PipeWriter:
    """Writes whole messages to a non-blocking pipe (see `claimed_stdout`): what fits at
    once, the rest when there is room again; a slow reader holds up this writer, never the
    loop. `flush` has nothing to do."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self.fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            data = data[written:]

    async def flush(self) -> None:
        return None


@contextlib.contextmanager
def claimed_stdout() -> Iterator[int | None]:
    """When fd 1 is a pipe: a private, non-blocking copy of it, with fd 1 pointing at stderr
    meanwhile (as the SDK does for the stdout it claims, so stray output misses the wire);
    restored after, blocking again. None when fd 1 is anything else, or the very pipe stderr
    writes to: the SDK claims it and writes it in its threads."""
    if not is_pipe(1) or _same_file(1, 2):
        yield None
        return
    private = os.dup(1)
    try:
        diversion = os.dup(2)
    except OSError:
        diversion = os.open(os.devnull, os.O_WRONLY)
    os.dup2(diversion, 1)
    os.close(diversion)
    os.set_blocking(private, False)
    try:
        yield private
    finally:
        os.set_blocking(private, True)
        os.dup2(private, 1)
        os.close(private)


def _same_file(a: int, b: int) -> bool:
    try:
        first, second = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


class Writer(Protocol):
    async def write(self, text: str) -> None: ...

    async def flush(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Wire:
    """The door's stdio: the client's lines, and where answers are written (None: stdout is
    no pipe, and the SDK claims it and writes it in its threads)."""

    lines: AsyncIterable[str]
    writer: Writer | None


@contextlib.contextmanager
def open_wire() -> Iterator[Wire]:
    """The wire, claimed: as the SDK does for the stdio it claims, fd 0 points at the null
    device and fd 1 at stderr meanwhile, so nothing else in the process (or its children)
    reads or writes it. A wire that is a pipe is read and written on the event loop, not in
    the SDK's threads."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = io.TextIOWrapper(
        os.fdopen(private, "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    try:
        lines: Any = PipeLines(private) if is_pipe(private) else anyio.wrap_file(text)
        with claimed_stdout() as out:
            yield Wire(lines, PipeWriter(out) if out is not None else None)
    finally:
        os.dup2(private, 0)
        os.close(private)
