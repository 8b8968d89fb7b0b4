"""Wyoming events read within bounds, written by the `wyoming` package.

The package's own reader trusts the peer: it reads as many bytes as `data_length` or
`payload_length` claim and swallows malformed lines. Here each part is checked before it is
read (its size, its JSON, its shape) and must arrive within the idle bound; a frame that
breaks a rule raises `FrameError`, after which the stream's framing is lost and the
connection is answered and closed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wyoming.event import Event

from pipelines.outcomes import Outcome
from workers.doors.wyoming.limits import Limits


class FrameError(Exception):
    """An event that cannot be read as the protocol and the bounds say."""

    def __init__(self, outcome: Outcome, text: str) -> None:
        super().__init__(text)
        self.outcome = outcome
        self.text = text


async def _within(limits: Limits, read: Any) -> bytes:
    try:
        found: bytes = await asyncio.wait_for(read, limits.idle_seconds)
    except TimeoutError:
        raise FrameError(
            Outcome.TIMEOUT, f"nothing arrived for {limits.idle_seconds:g} s: connection closed"
        ) from None
    return found


def _length(header: dict[str, Any], name: str, limit: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FrameError(Outcome.INVALID_INPUT, f"`{name}` must be a whole number of bytes")
    if value > limit:
        raise FrameError(
            Outcome.AUDIO_TOO_LARGE if name == "payload_length" else Outcome.INVALID_INPUT,
            f"`{name}` {value} is over this server's {limit} bytes",
        )
    return value


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        found = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise FrameError(Outcome.INVALID_INPUT, f"the event's {what} is not JSON") from None
    if not isinstance(found, dict):
        raise FrameError(Outcome.INVALID_INPUT, f"the event's {what} is not a JSON object")
    return found


async def read_event(reader: asyncio.StreamReader, limits: Limits) -> Event | None:
    """The next event; None when the peer closed the connection between events."""
    try:
        line = await _within(limits, reader.readuntil(b"\n"))
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise FrameError(Outcome.INVALID_INPUT, "the connection closed inside an event") from None
    except asyncio.LimitOverrunError:
        raise FrameError(
            Outcome.INVALID_INPUT, f"an event's header line is over {limits.header_bytes} bytes"
        ) from None
    header = _json_object(line, "header")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise FrameError(Outcome.INVALID_INPUT, "the event has no `type`")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise FrameError(Outcome.INVALID_INPUT, "the event's `data` is not a JSON object")
    data_length = _length(header, "data_length", limits.data_bytes)
    payload_length = _length(header, "payload_length", limits.payload_bytes)
    try:
        if data_length:
            data.update(
                _json_object(await _within(limits, reader.readexactly(data_length)), "data")
            )
        payload = (
            await _within(limits, reader.readexactly(payload_length)) if payload_length else None
        )
    except asyncio.IncompleteReadError:
        raise FrameError(Outcome.INVALID_INPUT, "the connection closed inside an event") from None
    return Event(type=kind, data=data, payload=payload)
