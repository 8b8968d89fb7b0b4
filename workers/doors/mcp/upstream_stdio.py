"""An upstream's stdio, read by the proxy itself: linear, bounded, and every request settled.

The SDK's stdio client re-splits its whole buffer on each 64 KiB read (a 60 MB line costs
minutes) and drops a line it cannot parse, leaving the request it answered waiting forever.
Here the upstream's stdout is split scanning only new bytes; a message over the cap is
discarded as it streams by (never buffered whole); a large line is parsed in a worker
thread; and a response that cannot be used settles its request with a JSON-RPC error. Its
id is read from the line's first bytes (servers write `id` before `result`); failing that,
the only request in flight is the one it answered. With several in flight and no id, none
is guessed: the per-call timeout settles them. A line that is no response (a stray log
line) settles nothing.

The process is started, or taken ready from `Prestarted`, and stopped by
`workers.doors.mcp.upstream_process`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.abc import ByteReceiveStream, Process
from mcp import StdioServerParameters
from mcp.client.stdio import _drain_stdout, get_default_environment
from mcp.shared.message import SessionMessage

from workers.doors.mcp.early_answers import valid_id
from workers.doors.mcp.upstream_process import spawn, stop_process

log = logging.getLogger("mcp_media.proxy")

READ_BYTES = 1024 * 1024  # asked per read; a pipe hands over what it holds
THREAD_PARSE_BYTES = 1024 * 1024  # lines above this are parsed off the event loop
ID_SCAN_BYTES = 64 * 1024  # where a line's id is looked for when the line cannot be used
_FLUSH_TIMEOUT = 0.5

# JSON tokens, without descending into values: strings whole, brackets, separators, scalars.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,"]|[^\s{}\[\]:,"]+')


@dataclass(frozen=True, slots=True)
class Oversize:
    """A line longer than the cap, discarded: its first bytes (for its id) and its size."""

    head: bytes
    size: int


class LineSplitter:
    """Newline-delimited messages from a byte stream, scanning each byte once.

    At most `max_bytes` (plus one read) are held: a longer line is dropped as it arrives and
    reported once, when its newline comes, as an `Oversize` with its first bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._dropping: tuple[bytes, int] | None = None  # an oversize line: head, size so far

    def feed(self, chunk: bytes) -> list[bytes | Oversize]:
        out: list[bytes | Oversize] = []
        while chunk:
            if self._dropping is not None:
                head, size = self._dropping
                end = chunk.find(b"\n")
                if end < 0:
                    self._dropping = head, size + len(chunk)
                    return out
                out.append(Oversize(head, size + end))
                self._dropping, chunk = None, chunk[end + 1 :]
                continue
            self._buffer += chunk
            chunk = b""
            while (end := self._buffer.find(b"\n", self._scanned)) >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]  # cheap: bytearray drops its head in place
                self._scanned = 0
                out.append(
                    line
                    if len(line) <= self.max_bytes
                    else Oversize(line[:ID_SCAN_BYTES], len(line))
                )
            self._scanned = len(self._buffer)
            if self._scanned > self.max_bytes:
                self._dropping = bytes(self._buffer[:ID_SCAN_BYTES]), self._scanned
                self._buffer = bytearray()
                self._scanned = 0
        return out


@dataclass(frozen=True, slots=True)
class Head:
    """What the first bytes of a line say about it: its top-level keys and its id."""

    keys: frozenset[bytes]
    id: types.RequestId | None

    @property
    def is_response(self) -> bool:
        return bool(self.keys & {b"result", b"error"}) and b"method" not in self.keys


def read_head(data: bytes) -> Head:
    """The top-level keys and `id` of the JSON object `data` starts with, read from its
    first ID_SCAN_BYTES without parsing nested values (which may be what made it unusable)."""
    depth = 0
    keys: set[bytes] = set()
    found: types.RequestId | None = None
    key: bytes | None = None
    after_colon = False
    for match in _TOKEN.finditer(data, 0, ID_SCAN_BYTES):
        token = match.group()
        if token == b'"':
            break  # a string cut off by the scan window
        if token in (b"{", b"["):
            if depth == 1 and after_colon:
                key, after_colon = None, False
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                break
        elif depth != 1:
            continue
        elif token == b":":
            after_colon = key is not None
        elif token == b",":
            key, after_colon = None, False
        elif after_colon:
            if key == b"id":
                found = _id_value(token)
            key, after_colon = None, False
        elif token.startswith(b'"'):
            key = token[1:-1]
            keys.add(key)
    return Head(frozenset(keys), found)


def _id_value(token: bytes) -> types.RequestId | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if valid_id(value) else None


def _parse(line: bytes) -> types.JSONRPCMessage:
    return types.jsonrpc_message_adapter.validate_json(line, by_name=False)


class _InFlight:
    """Ids of the requests sent upstream and not answered yet, oldest first."""

    def __init__(self) -> None:
        self._ids: dict[types.RequestId, None] = {}

    def sent(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids[message.id] = None
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"  # its caller stopped waiting
        ):
            self.answered((message.params or {}).get("requestId"))

    def answered(self, request_id: Any) -> None:
        if valid_id(request_id):
            self._ids.pop(request_id, None)

    def has(self, request_id: types.RequestId | None) -> bool:
        return request_id is not None and request_id in self._ids

    def only(self) -> types.RequestId | None:
        return next(iter(self._ids)) if len(self._ids) == 1 else None


class _Reader:
    """Turns the upstream's stdout into session messages (or errors settling a request)."""

    def __init__(self, name: str, max_bytes: int, in_flight: _InFlight) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.in_flight = in_flight

    async def messages(
        self, stdout: ByteReceiveStream, read: bytes = b""
    ) -> AsyncIterator[SessionMessage]:
        """The messages of `read` (bytes already read from it), then of `stdout`."""
        splitter = LineSplitter(self.max_bytes)
        for line in splitter.feed(read):
            message = await self._message(line)
            if message is not None:
                yield message
        try:
            while True:
                chunk = await stdout.receive(READ_BYTES)
                for line in splitter.feed(chunk):
                    message = await self._message(line)
                    if message is not None:
                        yield message
        except anyio.EndOfStream:
            return

    async def _message(self, line: bytes | Oversize) -> SessionMessage | None:
        if isinstance(line, Oversize):
            log.warning(
                "upstream %s: a message of %d bytes discarded (cap %d)",
                self.name,
                line.size,
                self.max_bytes,
            )
            return self._settle(
                line.head,
                f"upstream {self.name!r} sent a message of {line.size} bytes, over the cap of "
                f"{self.max_bytes} (MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB); it was discarded",
            )
        if not line.strip():
            return None
        try:
            if len(line) > THREAD_PARSE_BYTES:
                message = await anyio.to_thread.run_sync(_parse, line)
            else:
                message = _parse(line)
        except (ValueError, RecursionError) as exc:
            reason = " ".join(str(exc).split())[:300]
            log.warning("upstream %s: a line that is not JSON-RPC: %s", self.name, reason)
            return self._settle(
                line, f"upstream {self.name!r} sent an answer that cannot be read: {reason}"
            )
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.in_flight.answered(message.id)
        return SessionMessage(message)

    async def answer(self, message: dict[str, Any]) -> SessionMessage | None:
        """An answer read by someone else (the early front), as if read here."""
        return await self._message(json.dumps(message).encode())

    def _settle(self, data: bytes, why: str) -> SessionMessage | None:
        """The error for the request an unusable line answered, if it is known: the line
        must read as a response (a top-level `result` or `error`, no `method`: not a log
        line, not the upstream's own request), to a request in flight, named by its id or
        else the only one."""
        head = read_head(data)
        request_id = head.id if head.id is not None else self.in_flight.only()
        if not head.is_response or not self.in_flight.has(request_id):
            return None  # several in flight, none named: the call timeout settles them
        self.in_flight.answered(request_id)
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=why)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _abandoned(message: types.JSONRPCMessage, request_id: str | None) -> bool:
    """The answer to a request the early front sent and stopped waiting for."""
    return (
        request_id is not None
        and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
        and message.id == request_id
    )


@asynccontextmanager
async def upstream_stdio(
    name: str,
    server: StdioServerParameters,
    max_bytes: int,
    errlog: TextIO = sys.stderr,
    process: Process | None = None,
    handshake: Any = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn the upstream (its own process group), or use its `process` started ahead, and
    exchange messages over its stdio. With the early front's `handshake` on that process
    (`early_front.UpstreamHandshake`), the session's `initialize` is answered with the
    answer the front had, its `notifications/initialized` is not sent again, and what the
    front read and did not use is read first."""
    if process is None:
        env = get_default_environment() | (server.env or {})
        process = await spawn(server.command, server.args, env, server.cwd, errlog)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    in_flight = _InFlight()
    reader = _Reader(name, max_bytes, in_flight)
    writer_done = anyio.Event()
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = process.stdout, process.stdin

    handed = anyio.Event()  # the session's initialize answered from the handshake
    if handshake is None:
        handed.set()
    to_drop: list[str] = []  # what the front sent already

    async def read_stdout() -> None:
        try:
            async with read_writer:
                await handed.wait()
                read = handshake.rest() if handshake is not None else b""
                async for message in reader.messages(stdout, read):
                    if handshake is None or not _abandoned(message.message, handshake.abandoned):
                        await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session or the pipe is gone; the session sees the stream end
        finally:
            await _drain_stdout(process)

    async def write_stdin() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    if handshake is not None and await _shaken(session_message.message):
                        continue
                    in_flight.sent(session_message.message)
                    data = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the upstream stopped reading: end the session
        finally:
            writer_done.set()

    async def _shaken(message: Any) -> bool:
        """Whether `message` was the front's to send, and is answered (or dropped) here."""
        if isinstance(message, types.JSONRPCNotification) and message.method in to_drop:
            to_drop.remove(message.method)
            return True
        if handed.is_set() or not isinstance(message, types.JSONRPCRequest):
            return False
        if message.method != "initialize":
            return False
        await handshake.done.wait()
        if handshake.answer is None:  # it ended first: the session finds out on its own
            handed.set()
            return False
        if handshake.initialized:
            to_drop.append("notifications/initialized")
        answer = await reader.answer({**handshake.answer, "id": message.id})
        if answer is not None:
            await read_writer.send(answer)
        handed.set()
        return True

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH_TIMEOUT):
                    await writer_done.wait()
                await stop_process(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
                await anyio.lowlevel.checkpoint()
            tasks.cancel_scope.cancel()
