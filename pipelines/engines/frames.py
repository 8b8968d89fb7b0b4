"""Length-prefixed JSON frames over a pipe: the protocol between a worker and its reader child.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON (an object).
Nothing is ever unpickled; the reader bounds each frame's length before reading it.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import IO, Any

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other end closed the pipe, sent a malformed frame, or missed the deadline."""


class FrameTimeout(FrameError):
    pass


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise FrameError(f"a frame that is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError("a frame that is not a JSON object")
    return message


def write(stream: IO[bytes], message: dict[str, Any]) -> None:
    stream.write(encode(message))
    stream.flush()


def read_blocking(stream: IO[bytes], limit: int) -> dict[str, Any] | None:
    """The next frame from `stream`, or None at a clean end of input (the child's side)."""
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise FrameError("the pipe closed inside a frame header")
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise FrameError(f"a frame of {size} bytes (at most {limit})")
    body = stream.read(size)
    if len(body) < size:
        raise FrameError("the pipe closed inside a frame")
    return decode(body)


def read_until(fd: int, limit: int, deadline: float) -> dict[str, Any]:
    """The next frame from the pipe `fd` by `deadline` (time.monotonic), the parent's side."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise FrameError(f"a frame of {size} bytes (at most {limit})")
    return decode(_read_exactly(fd, size, deadline))


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise FrameTimeout("no answer before the deadline")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise FrameError("the pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
