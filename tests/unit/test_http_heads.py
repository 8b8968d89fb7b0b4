"""The doors' h11 connection: a head past the limits is refused however it arrives (whole in
one read, which h11 alone lets through, or piece by piece), with the status and code the
door's answer carries."""

from __future__ import annotations

import h11
import pytest

from tests.support.raw_http import head, hostile_heads
from workers.doors.http_heads import BoundedConnection, HeadLimits, HeadRefusal

pytestmark = pytest.mark.unit

LIMITS = HeadLimits(max_bytes=16 * 1024)


def _read(data: bytes, piece: int) -> h11.Request | HeadRefusal:
    conn = BoundedConnection(LIMITS)
    for start in range(0, len(data), piece):
        conn.receive_data(data[start : start + piece])
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            assert conn.refusal is not None
            return conn.refusal
        if isinstance(event, h11.Request):
            return event
    raise AssertionError("the head was neither read nor refused")


@pytest.mark.parametrize("piece", [1 << 30, 4096])
@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("header_20kb", 431, "request_header_fields_too_large"),
        ("header_1mb", 431, "request_header_fields_too_large"),
        ("headers_10000", 431, "request_header_fields_too_large"),
        ("url_100kb", 431, "request_header_fields_too_large"),
        ("headers_150_tiny", 431, "request_header_fields_too_large"),
        ("no_colon", 400, "invalid_request"),
        ("non_ascii_name", 400, "invalid_request"),
        ("non_ascii_url", 400, "invalid_request"),
    ],
)
def test_hostile_heads_are_refused_whole_or_in_pieces(
    kind: str, status: int, code: str, piece: int
) -> None:
    refusal = _read(hostile_heads(b"/v1/models")[kind], piece)
    assert isinstance(refusal, HeadRefusal), kind
    assert (refusal.status, refusal.code) == (status, code)
    assert 0 < len(refusal.message) < 300  # the client's bytes are not echoed whole


def test_a_head_under_the_limits_is_read() -> None:
    lines = [b"X-Cookie: " + b"c" * 12_000, *(b"X-F%d: a" % i for i in range(90))]
    request = _read(head(b"/v1/models", lines), 1 << 30)
    assert isinstance(request, h11.Request) and len(request.headers) == 92


def test_the_refusal_names_the_limit() -> None:
    refusal = _read(hostile_heads(b"/")["header_20kb"], 1 << 30)
    assert isinstance(refusal, HeadRefusal) and "16 KiB" in refusal.message


def test_a_chunk_size_line_past_the_limit_is_named_as_such() -> None:
    conn = BoundedConnection(LIMITS)
    conn.receive_data(head(b"/", [b"Transfer-Encoding: chunked"], method=b"POST"))
    assert isinstance(conn.next_event(), h11.Request)
    conn.receive_data(b"1" * 20_000)
    with pytest.raises(h11.RemoteProtocolError):
        conn.next_event()
    assert conn.refusal is not None and conn.refusal.status == 431
    assert "chunk" in conn.refusal.message


def test_a_head_whose_end_starts_the_next_read_keeps_its_body() -> None:
    """The cut of an oversize read never takes a head that ends across two reads."""
    body = b"b" * 40_000
    conn = BoundedConnection(LIMITS)
    conn.receive_data(head(b"/", [b"Content-Length: 40000"], method=b"POST")[:-2])
    assert conn.next_event() is h11.NEED_DATA
    conn.receive_data(b"\r\n" + body)
    assert isinstance(conn.next_event(), h11.Request)
    got = b""
    while isinstance(event := conn.next_event(), h11.Data):
        got += event.data
    assert got == body and isinstance(event, h11.EndOfMessage)


def test_a_small_head_and_a_large_body_in_one_read_are_read_whole() -> None:
    body = b"b" * 40_000
    conn = BoundedConnection(LIMITS)
    conn.receive_data(head(b"/", [b"Content-Length: 40000"], method=b"POST") + body)
    assert isinstance(conn.next_event(), h11.Request)
    got = b""
    while isinstance(event := conn.next_event(), h11.Data):
        got += event.data
    assert got == body
