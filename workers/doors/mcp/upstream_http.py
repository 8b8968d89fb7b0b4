"""An upstream's HTTP answers, bounded as they stream: the HTTP client of an upstream reached
over streamable HTTP or SSE.

The SDK reads a JSON answer whole however large, and fails an SSE stream on an event over
1 MiB (its default), which the proxy took for the upstream stopping. Here the client's
transport holds a JSON body, or one SSE event, only up to the cap (as for stdio,
MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB); past it nothing more of it is read and the SDK is
handed, in its place, a JSON-RPC error for the request it answered: the POST's own id, or on
the legacy SSE stream (every answer on one GET) the id in the event's first bytes. The call
gets that error; the session and its other calls go on. A body in a content coding is
refused whole (its decoded size cannot be bounded as it streams): the client asks for none.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx2
import mcp_types as types

from workers.doors.mcp.upstream_stdio import ID_SCAN_BYTES, read_head

log = logging.getLogger("mcp_media.proxy")

# The SDK's SSE client (the legacy transport) fails its stream past this, whatever we allow.
SSE_CLIENT_EVENT_BYTES = 1024 * 1024
_SETTING = "MCP_MEDIA_MCP__MAX_UPSTREAM_MESSAGE_MB"


class BoundedTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport with each answer's JSON body or SSE event held up to `cap` bytes."""

    def __init__(self, name: str, cap: int, note: str = _SETTING) -> None:
        self.name = name
        self.cap = cap
        self.note = note  # what sets the cap, for the error
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        rid = _request_id(request)
        bound = _Bound(self, rid, kind)
        if coding != "identity":
            chunks = bound.refused(f"a body in the {coding!r} content coding, not asked for")
        elif kind == "text/event-stream":
            chunks = bound.events(response.stream)
        else:
            chunks = bound.body(response.stream, response.headers.get("content-length"))
        headers = [
            (key, value)
            for key, value in response.headers.multi_items()
            if key.lower() not in ("content-length", "content-encoding")
        ]
        return httpx2.Response(
            status_code=response.status_code,
            headers=headers,
            stream=_Stream(chunks, response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def bounded_client(name: str, cap: int, note: str = _SETTING, **options: Any) -> httpx2.AsyncClient:
    """An HTTP client for the upstream `name` whose answers are bounded by `cap`."""
    headers = httpx2.Headers(options.pop("headers", None) or {})
    headers["accept-encoding"] = "identity"  # a coded body's decoded size is not bounded
    transport = BoundedTransport(name, cap, note)
    return httpx2.AsyncClient(headers=headers, transport=transport, **options)


def _request_id(request: httpx2.Request) -> types.RequestId | None:
    """The JSON-RPC id of a POSTed request (the SDK writes `id` before `params`)."""
    if request.method != "POST":
        return None
    try:
        return read_head(request.content).id
    except httpx2.RequestNotRead:
        return None


class _Stream(httpx2.AsyncByteStream):
    def __init__(self, chunks: AsyncGenerator[bytes], inner: Any) -> None:
        self.chunks = chunks
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.chunks.aclose()
        finally:
            await self.inner.aclose()


class _Bound:
    """One answer's bytes, passed on within the cap or replaced by an error."""

    def __init__(self, transport: BoundedTransport, rid: types.RequestId | None, kind: str):
        self.name = transport.name
        self.cap = transport.cap
        self.note = transport.note
        self.rid = rid
        self.kind = kind

    def _why(self, what: str) -> str:
        log.warning("upstream %s: %s discarded (cap %d bytes)", self.name, what, self.cap)
        return (
            f"upstream {self.name!r} sent {what}, over the cap of {self.cap} bytes "
            f"({self.note}); it was discarded"
        )

    def _error(self, rid: types.RequestId | None, why: str) -> bytes:
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=why)
        answer = types.JSONRPCError(jsonrpc="2.0", id=rid, error=error)
        data = answer.model_dump_json(by_alias=True).encode()
        return (
            b"event: message\ndata: " + data + b"\n\n" if self.kind == "text/event-stream" else data
        )

    async def refused(self, what: str) -> AsyncGenerator[bytes]:
        yield self._error(self.rid, self._why(what))

    async def body(self, stream: Any, declared: str | None) -> AsyncGenerator[bytes]:
        """A whole body within the cap (a JSON answer is read whole anyway), else the error."""
        if declared is not None and declared.isdigit() and int(declared) > self.cap:
            yield self._error(self.rid, self._why(f"an answer of {declared} bytes"))
            return
        held: list[bytes] = []
        size = 0
        async for chunk in stream:
            size += len(chunk)
            if size > self.cap:
                yield self._error(self.rid, self._why("an answer"))
                return
            held.append(chunk)
        yield b"".join(held)

    async def events(self, stream: Any) -> AsyncGenerator[bytes]:
        """Whole events (line ends made LF), each within the cap. An event past it is dropped
        as it streams: on a POST's stream its error ends the stream (the answer was that
        event); on the legacy GET stream its error goes in its place and the stream goes on."""
        held: deque[bytes] = deque()  # the event under way, while within the cap (not joined)
        size = 0
        first: bytes | None = None  # the first bytes of the event under way, once past it
        last = b""  # the event's last byte so far: a line end there and one next end it
        async for text in _line_feeds(stream):
            while text:
                end = _event_end(last, text)
                piece, text = (text, b"") if end < 0 else (text[:end], text[end:])
                last = piece[-1:] or last
                if first is None:
                    held.append(piece)
                    size += len(piece)
                    if size > self.cap:
                        first = _first_bytes(held)
                        held.clear()
                        size = 0
                if end < 0:
                    continue
                last = b""
                if first is None:
                    while held:
                        yield held.popleft()
                    size = 0
                    continue
                error, first = self._dropped(first), None
                if error is not None:
                    yield error
                    if self.rid is not None:
                        return
        if first is not None:
            error = self._dropped(first)
            if error is not None:
                yield error
        for piece in held:
            yield piece

    def _dropped(self, first: bytes) -> bytes | None:
        """The error event for a dropped event: for the POST's request, or for the one the
        event answered (its `data:` names it); None when it answered no known request."""
        why = self._why("an event")
        if self.rid is not None:
            return self._error(self.rid, why)
        start = first.find(b"data:")
        head = read_head(first[start + 5 :].lstrip()) if start >= 0 else None
        if head is None or head.id is None or not head.is_response:
            return None
        return self._error(head.id, why)


async def _line_feeds(stream: Any) -> AsyncIterator[bytes]:
    """The stream with its line ends (CRLF, CR, LF) made LF, a CRLF cut in two included."""
    carriage = False
    async for chunk in stream:
        if carriage:
            chunk = b"\r" + chunk
        carriage = chunk.endswith(b"\r")
        if carriage:
            chunk = chunk[:-1]
        yield chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if carriage:
        yield b"\n"


def _first_bytes(chunks: deque[bytes]) -> bytes:
    first = bytearray()
    for chunk in chunks:
        first += chunk[: ID_SCAN_BYTES - len(first)]
        if len(first) >= ID_SCAN_BYTES:
            break
    return bytes(first)


def _event_end(before: bytes | bytearray, text: bytes) -> int:
    """Where in `text` the event under way ends (just past its blank line), or -1; `before`
    is the byte before `text` (a line end there and one at the start of `text` end it)."""
    if before == b"\n" and text.startswith(b"\n"):
        return 1
    found = text.find(b"\n\n")
    return -1 if found < 0 else found + 2
