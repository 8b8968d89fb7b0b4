"""The request head (request line and header fields) of the HTTP doors: bounded, well formed,
or answered in the door's own shape.

uvicorn's h11 parser bounds a head only while it is incomplete (past its buffer limit, 16 KiB),
so a head of 200 KiB that arrives in one read is taken whole; one it refuses (too long, a
header line without a colon, a name that is not a token) gets a plain-text 400 and the
socket closed at once, with the rest of the request unread: the kernel then resets the
connection and the client may never read even that. `head_protocol` is uvicorn's h11
protocol with the head bounded however it arrives (`HeadLimits`), every refusal answered by
the door's `Shape` (431 or 400 and a code), and the connection closed gently: the answer
and a FIN, then what the client still sends read and dropped (within bounds) until it closes.

Both doors name it as their `http` protocol, so uvicorn never picks httptools instead, even
where it is installed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

DEFAULT_MAX_FIELDS = 100
DEFAULT_SECONDS = 30.0
DRAIN_BYTES = 4 << 20  # what a refused client may still send, read and dropped at most
DRAIN_SECONDS = 2.0
_HEAD_END = re.compile(rb"\n\r?\n")
_LINE_ENDS = (b"\n", b"\r\n")  # a read starting with one may end a head begun before it
_SHOWN = 200  # characters of the parser's complaint (it quotes the client's bytes)


@dataclass(frozen=True, slots=True)
class HeadLimits:
    max_bytes: int  # the request line and header fields together
    max_fields: int = DEFAULT_MAX_FIELDS
    seconds: float = DEFAULT_SECONDS  # for a head, from its first byte to its end


@dataclass(frozen=True, slots=True)
class HeadRefusal:
    status: int  # 431 or 400 (501 for a transfer coding h11 does not speak)
    code: str
    message: str


Shape = Callable[[HeadRefusal], bytes]  # the door's JSON body for a refusal


def refusal_for(
    error: h11.RemoteProtocolError, limits: HeadLimits, in_body: bool = False
) -> HeadRefusal:
    """What h11's complaint means for the client (`in_body`: raised reading the body)."""
    if error.error_status_hint == 431:
        if in_body:
            return _too_large(f"a chunk's size line or trailer is over {_kib(limits)}")
        return _too_large(f"the request line and headers are over {_kib(limits)}")
    said = " ".join(str(error).split())
    if len(said) > _SHOWN:
        said = said[:_SHOWN] + "..."
    if error.error_status_hint == 501:
        return HeadRefusal(501, "not_implemented", f"unsupported request: {said}")
    return HeadRefusal(400, "invalid_request", f"malformed request head: {said}")


def check_request(request: h11.Request, limits: HeadLimits) -> HeadRefusal | None:
    """A head h11 parsed whole (it arrived in one read) but past the limits."""
    size = len(request.method) + len(request.target) + 12  # " " " HTTP/1.1\r\n"
    size += sum(len(name) + len(value) + 4 for name, value in request.headers)
    if size > limits.max_bytes:
        return _too_large(f"the request line and headers are {size} bytes; at most {_kib(limits)}")
    if len(request.headers) > limits.max_fields:
        return _too_large(f"{len(request.headers)} header fields; at most {limits.max_fields}")
    return None


def _too_large(message: str) -> HeadRefusal:
    return HeadRefusal(431, "request_header_fields_too_large", message)


def _kib(limits: HeadLimits) -> str:
    return f"{limits.max_bytes / 1024:g} KiB"


class BoundedConnection(h11.Connection):
    """h11's server side with `limits` on every head; `refusal` says why it last refused one."""

    def __init__(self, limits: HeadLimits) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_bytes)
        self.limits = limits
        self.refusal: HeadRefusal | None = None

    def receive_data(self, data: bytes) -> None:
        # A new head over the limit in this one read is cut to just past it, so h11 refuses
        # it unparsed (parsing 10,000 fields first costs a loaded core some 20 ms). Only
        # while no head is complete: what came before holds none, so a head that ends in
        # `data` within the limit (or at its very start, after earlier lines) is left whole.
        limit = self.limits.max_bytes
        if (
            self.their_state is h11.IDLE
            and len(data) > limit
            and not data.startswith(_LINE_ENDS)
            and _HEAD_END.search(data, 0, limit + 4) is None
        ):
            data = data[: limit + 1]
        super().receive_data(data)

    def next_event(self) -> Any:
        in_body = self.their_state is h11.SEND_BODY
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = refusal_for(exc, self.limits, in_body)
            raise
        if isinstance(event, h11.Request):
            self.refusal = check_request(event, self.limits)
            if self.refusal is not None:
                raise h11.RemoteProtocolError(self.refusal.message, self.refusal.status)
        return event


def head_protocol(limits: HeadLimits, shape: Shape) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, heads bounded by `limits`, refusals answered by `shape`."""

    class BoundedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = BoundedConnection(limits)
            self.dropped: int | None = None  # bytes read after a refusal, once there is one
            self.linger: asyncio.TimerHandle | None = None
            self.head_timer: asyncio.TimerHandle | None = None

        def data_received(self, data: bytes) -> None:
            if self.dropped is None:
                super().data_received(data)
                self._time_head()
                return
            self.dropped += len(data)
            if self.dropped > DRAIN_BYTES:
                self.transport.close()

        def send_400_response(self, msg: str) -> None:  # uvicorn calls it for any refusal
            assert isinstance(self.conn, BoundedConnection)
            refusal = self.conn.refusal or HeadRefusal(400, "invalid_request", msg)
            client = "{}:{}".format(*self.client) if self.client else "a client"
            log.warning("refused a request head from %s: %s %s", client, refusal.status,
                        refusal.message)  # fmt: skip
            body = shape(refusal)
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            try:
                for event in (
                    h11.Response(status_code=refusal.status, headers=headers),
                    h11.Data(data=body),
                    h11.EndOfMessage(),
                ):
                    self.transport.write(self.conn.send(event) or b"")
            except h11.LocalProtocolError:  # an answer already under way: nothing to add
                self.transport.close()
                return
            # Closing now, with the client's bytes unread, would reset the connection: send
            # a FIN after the answer, and read (and drop) until the client closes, or the bounds.
            self.dropped = 0
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.linger = self.loop.call_later(DRAIN_SECONDS, self.transport.close)

        def _time_head(self) -> None:
            """A head begun (bytes held, no request yet) has `limits.seconds` to end."""
            begun = self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])
            if not begun and self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None
            elif begun and self.head_timer is None and self.dropped is None:
                self.head_timer = self.loop.call_later(limits.seconds, self._head_too_slow)

        def _head_too_slow(self) -> None:
            """408 in the door's shape, then the connection closed. Written as it goes on the
            wire: h11 has no request to answer yet."""
            self.head_timer = None
            refusal = HeadRefusal(
                408, "request_timeout",
                f"the request head did not arrive within {limits.seconds:g} s",
            )  # fmt: skip
            client = "{}:{}".format(*self.client) if self.client else "a client"
            log.warning("refused a request head from %s: 408 %s", client, refusal.message)
            body = shape(refusal)
            self.dropped = 0
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in (self.linger, self.head_timer):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

    return BoundedH11Protocol
