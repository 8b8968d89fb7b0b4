"""Client messages the SDK would drop in silence, answered with a JSON-RPC error instead.

The SDK reads a request whose id is not a string or an integer (`{"a":1}`, `1e999`, `true`,
an array) as a notification, since that model ignores unknown keys: nothing is answered.
Over stdio a line that is not JSON, or not one JSON-RPC object, is dropped too. JSON-RPC
says: Invalid Request (-32600) or Parse error (-32700), with a null id.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from workers.doors.mcp.stdio_pipes import PipeLines, PipeWriter, claimed_stdout, is_pipe


def valid_id(value: Any) -> bool:
    """A JSON-RPC id the SDK can answer: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def rejection(raw: bytes | str) -> types.JSONRPCError | None:
    """The error owed to a client message the SDK would not answer, or None."""
    return read_message(raw)[1]


def read_message(raw: bytes | str) -> tuple[Any, types.JSONRPCError | None]:
    """A client message decoded, and the error it is owed if the SDK would not answer it."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = " ".join(str(exc).split())[:200]
        return None, _error(types.PARSE_ERROR, f"Parse error: {reason}")
    if not isinstance(message, dict):
        return message, _error(types.INVALID_REQUEST, "Invalid Request: expected one object")
    if message.get("jsonrpc") != "2.0":  # the SDK answered with its whole validation dump
        return message, _error(types.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    if "id" in message and not valid_id(message["id"]):
        reason = "Invalid Request: the id must be a string or an integer"
        return message, _error(types.INVALID_REQUEST, reason)
    return message, None


def _error(code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
    )


class _CheckedLines:
    """stdin lines, less the ones owed an error: those are answered on `answers`."""

    def __init__(self, lines: Any) -> None:
        self.lines = lines
        self.answers: Any = None
        self.ready = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.lines:
            refused = rejection(line) if line.strip() else None
            if refused is None:
                yield line
                continue
            await self.ready.wait()
            await self.answers.send(SessionMessage(refused))


@asynccontextmanager
async def checked_stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio server, reading stdin through the check above. As the SDK does for the
    stdio it claims, fd 0 points at the null device and fd 1 at stderr meanwhile, so nothing
    else in the process (or its children) reads or writes the wire. A wire that is a pipe is
    read and written on the event loop (`stdio_pipes`), not in the SDK's threads."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    wire = io.TextIOWrapper(
        os.fdopen(private, "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    try:
        lines = _CheckedLines(PipeLines(private) if is_pipe(private) else anyio.wrap_file(wire))
        with claimed_stdout() as out:
            stdout = PipeWriter(out) if out is not None else None
            async with stdio_server(stdin=lines, stdout=stdout) as (read, write):  # type: ignore[arg-type]
                lines.answers = write
                lines.ready.set()
                yield read, write
    finally:
        os.dup2(private, 0)
        os.close(private)
