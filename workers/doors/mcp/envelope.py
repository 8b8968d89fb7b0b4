"""Client messages the SDK would drop in silence, answered with a JSON-RPC error instead.

The SDK reads a request whose id is not a string or an integer (`{"a":1}`, `1e999`, `true`,
an array) as a notification, since that model ignores unknown keys: nothing is answered.
Over stdio a line that is not JSON, or not one JSON-RPC object, is dropped too. JSON-RPC
says: Invalid Request (-32600) or Parse error (-32700), with a null id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from workers.doors.mcp.early_answers import valid_id
from workers.doors.mcp.stdio_pipes import Wire, open_wire


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
async def checked_stdio_server(wire: Wire | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio server on the wire (`stdio_pipes.open_wire`; this one's own when
    none is given), reading the client's lines through the check above."""
    if wire is None:
        with open_wire() as own:
            async with checked_stdio_server(own) as streams:
                yield streams
        return
    lines = _CheckedLines(wire.lines)
    async with stdio_server(stdin=lines, stdout=wire.writer) as (read, write):  # type: ignore[arg-type]
        lines.answers = write
        lines.ready.set()
        yield read, write
