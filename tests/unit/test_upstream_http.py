"""An HTTP upstream's answers bounded as they stream (workers.doors.mcp.upstream_http): whole SSE
events within the cap whatever their line ends and however the bytes are cut, an event or
JSON body past it replaced by a JSON-RPC error for the request it answered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from workers.doors.mcp.upstream_http import BoundedTransport, _Bound

pytestmark = pytest.mark.unit

CAP = 1000
SSE = "text/event-stream"


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _events(data: bytes, rid: Any = None, size: int = 7) -> list[bytes]:
    bound = _Bound(BoundedTransport("far", CAP), rid, SSE)

    async def read() -> list[bytes]:
        return [piece async for piece in bound.events(_chunks(data, size))]

    return b"".join(anyio.run(read)).split(b"\n\n")[:-1]


def _event(message: dict[str, Any], pad: int = 0) -> bytes:
    if pad:
        message = {**message, "result": {"text": "a" * pad}}
    return b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"


def _error(event: bytes) -> dict[str, Any]:
    data = event.partition(b"data: ")[2]
    parsed: dict[str, Any] = json.loads(data)
    return parsed


@pytest.mark.parametrize("size", [1, 2, 7, 4096])
@pytest.mark.parametrize("newline", [b"\r\n", b"\n", b"\r"])
def test_events_within_the_cap_pass_whole_however_cut(size: int, newline: bytes) -> None:
    data = b"".join(
        b"event: message" + newline + b'data: {"n": %d}' % n + newline + newline for n in range(5)
    )
    events = _events(data, size=size)
    assert events == [b'event: message\ndata: {"n": %d}' % n for n in range(5)]


def test_an_event_past_the_cap_on_a_post_ends_the_stream_with_the_error() -> None:
    data = _event({"jsonrpc": "2.0", "method": "notifications/progress"})
    data += _event({"jsonrpc": "2.0", "id": 7, "result": {}}, pad=5000)
    data += _event({"jsonrpc": "2.0", "id": 8, "result": {}})
    events = _events(data, rid=7)
    assert len(events) == 2 and b"progress" in events[0]
    error = _error(events[1])
    assert error["id"] == 7 and "over the cap of 1000 bytes" in error["error"]["message"]
    assert "'far'" in error["error"]["message"]


def test_on_the_legacy_stream_the_error_takes_the_event_s_place_and_the_stream_goes_on() -> None:
    data = _event({"jsonrpc": "2.0", "id": 3, "result": {}}, pad=5000)  # id first
    data += _event({"jsonrpc": "2.0", "method": "log", "params": {"x": "a" * 5000}})  # no id
    data += _event({"jsonrpc": "2.0", "id": 4, "result": {}})
    events = _events(data)
    assert len(events) == 2
    assert _error(events[0])["id"] == 3 and "error" in _error(events[0])
    assert _error(events[1]) == {"jsonrpc": "2.0", "id": 4, "result": {}}


def test_a_body_past_the_cap_is_replaced_by_the_error_and_not_read_further() -> None:
    bound = _Bound(BoundedTransport("far", CAP), "r1", "application/json")
    read = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal read
        while True:
            read += 100
            yield b"a" * 100

    async def body(declared: str | None, stream: AsyncIterator[bytes]) -> bytes:
        return b"".join([piece async for piece in bound.body(stream, declared)])

    refused = json.loads(anyio.run(body, None, endless()))
    assert refused["id"] == "r1" and "over the cap" in refused["error"]["message"]
    assert read <= CAP + 100
    declared = json.loads(anyio.run(body, "5000", _chunks(b"x" * 5000, 100)))
    assert "an answer of 5000 bytes" in declared["error"]["message"]
    assert anyio.run(body, "6", _chunks(b'{"a":1}', 3)) == b'{"a":1}'
