"""The stdio door's first answers, given before the MCP SDK is loaded (`early_answers` says
what they are), and the handover to the SDK-backed proxy.

The client's lines are read into a queue. A handshake-era `initialize` is answered at once,
and the stdio upstreams started ahead (`Prestarted`) are given their own handshake and
listing in raw JSON-RPC (`UpstreamHandshake`); the client's first `tools/list` is answered
from those. Anything else, or an answer the front is unsure of, ends the front: the SDK is
loaded and its session is given the client's `initialize` (its answer swallowed, checked
against the one sent), `notifications/initialized`, then every line not answered, in order.
Each upstream's SDK session takes its process with the handshake done (`upstream_stdio`).
No MCP SDK here, and no pydantic.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from workers import version
from workers.doors.mcp.early_answers import (
    HANDSHAKE_VERSIONS,
    MAX_PAGES,
    METHOD_NOT_FOUND,
    client_capabilities,
    initialize_result,
    is_first_listing,
    is_initialized,
    negotiated,
    tools_result,
    upstream_initialize,
)
from workers.doors.mcp.stdio_pipes import Wire, Writer
from workers.doors.mcp.upstream_process import Prestarted
from workers.doors.mcp.upstream_specs import UpstreamSpec

log = logging.getLogger("mcp_media.proxy")

FIRST_WAIT = 1.0  # s for the client's first line, then for each next one, before the SDK
LIST_WAIT = 3.0  # s the upstreams' listings are waited for; past it the SDK answers
READ_BYTES = 64 * 1024
_ID = "mcp-media-early-"  # our requests' ids upstream (the SDK's client counts from 0)


@dataclass(frozen=True, slots=True)
class Early:
    """What the front needs that the CLI knows: the own tools' wire JSON and the hidden."""

    own: Sequence[Mapping[str, Any]]
    hidden: frozenset[str]
    max_bytes: int


class UpstreamHandshake:
    """`initialize`, `notifications/initialized` and `tools/list` (page by page) on a
    prestarted upstream's process. Its SDK session takes over once `done`: the recorded
    `answer` stands for its own `initialize`, and what was read and not awaited (`rest`)
    is read by it first."""

    def __init__(self, name: str, process: Process, max_bytes: int) -> None:
        self.name = name
        self.process = process
        self.max_bytes = max_bytes
        self.done = anyio.Event()
        self.answer: dict[str, Any] | None = None  # the upstream's answer to `initialize`
        self.initialized = False  # notifications/initialized was sent
        self.tools: list[Any] | None = None  # every page, when all were read
        self._others: list[bytes] = []  # lines not awaited, for its SDK session
        self.abandoned: str | None = None  # the id of our request left unanswered
        self._buffer = bytearray()
        self._sent = 0

    def rest(self) -> bytes:
        """What was read and is the SDK session's to read: whole lines, then a part."""
        return b"".join(line + b"\n" for line in self._others) + bytes(self._buffer)

    async def run(self, params: dict[str, Any]) -> None:
        try:
            await self._run(params)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            log.info("upstream %s: ended during its early handshake", self.name)
        except _Unsure as exc:
            log.info("upstream %s: early listing left to the SDK (%s)", self.name, exc)
        finally:
            self.done.set()

    async def _run(self, params: dict[str, Any]) -> None:
        self.answer = await self._ask("initialize", params)
        result = self.answer.get("result")
        if not isinstance(result, dict) or result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
            return  # its SDK session meets the same answer and says why
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.initialized = True
        tools: list[Any] = []
        cursor: Any = None
        for _ in range(MAX_PAGES):
            answer = await self._ask("tools/list", {"cursor": cursor} if cursor else None)
            error = answer.get("error")
            if isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND:
                break  # lists nothing (as `Router.pages`)
            page = answer.get("result")
            if not isinstance(page, dict) or not isinstance(page.get("tools"), list):
                return
            tools += page["tools"]
            cursor = page.get("nextCursor")
            if not cursor:
                break
            if not isinstance(cursor, str):
                return
        else:
            return  # past MAX_PAGES: the SDK path says so
        self.tools = tools

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def _ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self._sent += 1
        request_id = f"{_ID}{self._sent}"
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        await self._send(request)
        while True:
            line = await self._line()
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if (
                isinstance(message, dict)
                and message.get("id") == request_id
                and "method" not in message
                and ("result" in message or "error" in message)
            ):
                return message
            self._others.append(line)
            if isinstance(message, dict) and "method" in message and "id" in message:
                # The upstream asks something (roots, sampling) only the client can answer,
                # maybe before it answers us: its SDK session takes over now, and the
                # answer to our request, when it comes, is not for that session.
                self.abandoned = request_id
                raise _Unsure(f"it asked {message['method']!r} during its listing")

    async def _line(self) -> bytes:
        assert self.process.stdout is not None
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > self.max_bytes:
                raise _Unsure(f"a message over {self.max_bytes} bytes")
            self._buffer += await self.process.stdout.receive(READ_BYTES)
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line


class _Unsure(Exception):
    pass


@dataclass(slots=True)
class Handover:
    """Where the front stopped: the client lines the SDK session is given first, the id and
    result of the `initialize` answered (the SDK's answer to it is swallowed), and whether
    the first `tools/list` was answered."""

    replay: list[str] = field(default_factory=list)
    init_id: Any = None
    init_result: dict[str, Any] | None = None
    listed: bool = False


class EarlyFront:
    def __init__(
        self, wire: Wire, writer: Writer, specs: Sequence[UpstreamSpec], prestarted: Prestarted
    ) -> None:
        self.wire = wire
        self.writer = writer
        self.specs = specs
        self.prestarted = prestarted
        self._lines = _Queue()
        self._handshakes: dict[str, UpstreamHandshake] = {}

    async def _pump(self) -> None:
        try:
            async for line in self.wire.lines:
                self._lines.put(line)
        finally:
            self._lines.put(None)

    async def _next(self) -> tuple[str, Any] | None:
        line = await self._lines.take(FIRST_WAIT)
        if line is None:
            return None
        try:
            return line, json.loads(line)
        except (ValueError, RecursionError):
            return line, None

    async def run(self, tasks: TaskGroup, early: Early) -> Handover:
        """Answer what can be answered now; the rest waits in the queue for the SDK."""
        tasks.start_soon(self._pump)
        handover = Handover()
        first = await self._next()
        if first is None:
            return handover
        line, message = first
        handover.replay.append(line)
        capabilities = client_capabilities(message)
        if capabilities is None:
            return handover
        handover.init_id = message["id"]
        handover.init_result = initialize_result(
            negotiated(message["params"]["protocolVersion"]), version.current()
        )
        await self._write({"jsonrpc": "2.0", "id": message["id"], "result": handover.init_result})
        self._start_upstreams(tasks, capabilities, early.max_bytes)
        while (read := await self._next()) is not None:
            line, message = read
            if is_initialized(message):
                handover.replay.append(line)
                continue
            if is_first_listing(message):
                result = await self._tools(handover.init_result["protocolVersion"], early)
                if result is not None:
                    await self._write({"jsonrpc": "2.0", "id": message["id"], "result": result})
                    log.info("tools/list answered early: %d tools", len(result["tools"]))
                    handover.listed = True
                    return handover
            handover.replay.append(line)
            return handover
        return handover

    def _start_upstreams(
        self, tasks: TaskGroup, capabilities: Mapping[str, Any], max_bytes: int
    ) -> None:
        params = upstream_initialize(capabilities)
        if params is None:
            return
        for spec in self.specs:
            process = self.prestarted.peek(spec.name)
            if process is None:
                continue
            handshake = self._handshakes[spec.name] = UpstreamHandshake(
                spec.name, process, max_bytes
            )
            self.prestarted.shaking(spec.name, handshake)
            tasks.start_soon(handshake.run, params)

    async def _tools(self, version: str, early: Early) -> dict[str, Any] | None:
        if any(spec.name not in self._handshakes for spec in self.specs):
            return None  # not started here (an HTTP upstream, a failed spawn)
        with anyio.move_on_after(LIST_WAIT):
            for handshake in self._handshakes.values():
                await handshake.done.wait()
        listed = []
        for spec in self.specs:
            tools = self._handshakes[spec.name].tools
            if tools is None:
                return None
            listed.append((spec.name, tools))
        return tools_result(version, listed, early.own, early.hidden, len(self.specs) > 1)

    async def _write(self, message: dict[str, Any]) -> None:
        await self.writer.write(json.dumps(message, separators=(",", ":")) + "\n")
        await self.writer.flush()

    def wire_after(self, handover: Handover) -> Wire:
        """The wire the SDK session reads and writes: the lines to replay, then the rest;
        its answer to the replayed `initialize` swallowed."""

        async def lines() -> AsyncIterator[str]:
            for line in handover.replay:
                yield line
            while (more := await self._lines.take()) is not None:
                yield more

        writer: Writer = self.writer
        if handover.init_id is not None:
            writer = _Swallowing(self.writer, handover.init_id, handover.init_result)
        return Wire(lines(), writer)


class _Queue:
    """The client's lines as read, then None for the end; taken with a timeout without
    losing one (a memory stream's receive cancelled as a line arrives may drop it)."""

    def __init__(self) -> None:
        self._lines: deque[str | None] = deque()
        self._arrived = anyio.Event()

    def put(self, line: str | None) -> None:
        self._lines.append(line)
        self._arrived.set()

    async def take(self, within: float = math.inf) -> str | None:
        """The next line; None at the end, or when none came `within` seconds."""
        if not self._lines:
            self._arrived = anyio.Event()
            with anyio.move_on_after(within):
                await self._arrived.wait()
        if not self._lines or self._lines[0] is None:
            return None  # the end stays for the next taker
        return self._lines.popleft()


class _Swallowing:
    """The SDK session's writes, less its answer to the `initialize` the front answered
    (one WARNING if the two differ)."""

    def __init__(self, inner: Writer, init_id: Any, sent: dict[str, Any] | None) -> None:
        self.inner = inner
        self.init_id = init_id
        self.sent = sent

    async def write(self, text: str) -> None:
        if self.init_id is not None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if (
                isinstance(message, dict)
                and "method" not in message
                and type(message.get("id")) is type(self.init_id)
                and message.get("id") == self.init_id
            ):
                self.init_id = None
                if message.get("result") != self.sent:
                    log.warning(
                        "the early answer to initialize was %s; the SDK's is %s",
                        json.dumps(self.sent),
                        json.dumps(message.get("result", message.get("error"))),
                    )
                return
        await self.inner.write(text)

    async def flush(self) -> None:
        await self.inner.flush()
