"""Request heads no client library would send (a header line of 1 MB, 10,000 fields, a line
without a colon), written on raw sockets to both HTTP doors as real processes: each gets its
door's error shape (OpenAI JSON from `serve`, a JSON-RPC error from the MCP door) with 431 or
400 and a code, the answer arrives whole (no reset), and the door serves the next request."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx2
import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_mcp_http import ACCEPT, INITIALIZE, mcp_door
from tests.support.raw_http import RawAnswer, exchange, head, hostile_heads
from tests.support.serve import serve

pytestmark = pytest.mark.integration

TOO_LARGE = (431, "request_header_fields_too_large")
MALFORMED = (400, "invalid_request")
EXPECTED = {
    "header_20kb": TOO_LARGE,
    "header_1mb": TOO_LARGE,
    "headers_200x100b": TOO_LARGE,
    "headers_10000": TOO_LARGE,
    "headers_150_tiny": TOO_LARGE,
    "url_100kb": TOO_LARGE,
    "no_colon": MALFORMED,
    "non_ascii_name": MALFORMED,
    "non_ascii_url": MALFORMED,
}
UNDER_THE_LIMIT = [b"X-Cookie: " + b"c" * 12_000, *(b"X-F%d: a" % i for i in range(90))]


def _answered(kind: str, answer: RawAnswer) -> None:
    assert answer.error is None, (kind, answer.error)  # read whole, never reset
    assert (answer.status, answer.headers.get("content-type")) == (
        EXPECTED[kind][0], "application/json",
    ), (kind, answer)  # fmt: skip
    assert answer.headers.get("connection") == "close"


def test_serve_answers_hostile_heads_in_the_openai_shape_and_keeps_serving(
    cluster: Cluster,
) -> None:
    assert set(hostile_heads(b"/")) == set(EXPECTED)
    with serve(cluster) as served:
        port = urlsplit(served.url).port
        assert port is not None
        key = b"Authorization: Bearer " + served.key.encode()
        for kind, request in hostile_heads(b"/v1/models").items():
            answer = exchange(port, request)
            _answered(kind, answer)
            error = answer.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}, (kind, error)
            assert error["code"] == EXPECTED[kind][1] and error["message"], (kind, error)
            assert error["type"] == "invalid_request_error"
            served_after = exchange(port, head(b"/v1/models", [key, b"Connection: close"]))
            assert served_after.status == 200, (kind, served_after)
            assert served_after.json()["data"], kind
        # Under the limit (16 KiB, 100 fields) a large head is served as any other.
        big = exchange(port, head(b"/v1/models", [key, *UNDER_THE_LIMIT, b"Connection: close"]))
        assert big.status == 200, big
        auth = {"Authorization": f"Bearer {served.key}"}
        assert httpx2.get(f"{served.url}/v1/models", headers=auth, timeout=10).status_code == 200
        assert "Traceback" not in served.log.read_text()


def test_a_larger_head_limit_is_a_setting(cluster: Cluster) -> None:
    with serve(cluster, MCP_MEDIA_API__MAX_HEADER_KB="64") as served:
        port = urlsplit(served.url).port
        assert port is not None
        key = b"Authorization: Bearer " + served.key.encode()
        request = head(b"/v1/models", [key, b"X-Big: " + b"a" * 40_000, b"Connection: close"])
        assert exchange(port, request).status == 200
        answer = exchange(port, hostile_heads(b"/v1/models")["url_100kb"])
        assert answer.status == 431 and "64 KiB" in answer.json()["error"]["message"]


def test_the_mcp_door_answers_hostile_heads_with_json_rpc_errors_and_keeps_serving(
    cluster: Cluster,
) -> None:
    with mcp_door(cluster) as (url, token):
        port = urlsplit(url).port
        assert port is not None
        for kind, request in hostile_heads(b"/mcp").items():
            answer = exchange(port, request)
            _answered(kind, answer)
            body = answer.json()
            assert body["jsonrpc"] == "2.0" and body["id"] is None, (kind, body)
            assert body["error"]["code"] == -32600 and body["error"]["message"], (kind, body)
            assert body["error"]["data"] == {"status": EXPECTED[kind][0], "code": EXPECTED[kind][1]}
            headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
            served_after = httpx2.post(url, json=INITIALIZE, headers=headers, timeout=30)
            assert served_after.status_code == 200, (kind, served_after.text[:200])


def _stalled(path: bytes, port: int) -> bytes:
    """A head begun and never ended, as a slow client (or a slowloris) leaves it."""
    return b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: a" % port


def test_serve_answers_a_stalled_head_or_body_with_a_408_and_keeps_serving(
    cluster: Cluster,
) -> None:
    with serve(cluster, MCP_MEDIA_API__HEAD_TIMEOUT="1") as served:
        port = urlsplit(served.url).port
        assert port is not None
        answer = exchange(port, _stalled(b"/v1/models", port))
        assert answer.error is None and answer.status == 408, answer
        assert answer.headers.get("connection") == "close"
        error = answer.json()["error"]
        assert error["code"] == "request_timeout" and "within 1 s" in error["message"], error
        key = b"Authorization: Bearer " + served.key.encode()
        for path, kind, begun in (
            (b"/v1/audio/speech", b"application/json", b'{"model": "tts-1", "inp'),
            (
                b"/v1/audio/transcriptions",
                b"multipart/form-data; boundary=b0",
                b"--b0\r\nContent-Disposition: form-data; "
                + b'name="file"; filename="a.wav"\r\n\r\nRIFF',
            ),
        ):
            lines = [key, b"Content-Type: " + kind, b"Content-Length: 5000"]
            stalled = head(path, lines, method=b"POST", port=port) + begun
            answer = exchange(port, stalled)
            assert answer.error is None and answer.status == 408, (path, answer)
            error = answer.json()["error"]
            assert error["code"] == "request_timeout", (path, error)
            assert "body stalled for 1 s" in error["message"], (path, error)
        uploads = cluster.home / "cache" / "uploads"
        assert not any(uploads.iterdir()) if uploads.exists() else True  # nothing left
        auth = {"Authorization": f"Bearer {served.key}"}
        assert httpx2.get(f"{served.url}/v1/models", headers=auth, timeout=10).status_code == 200


def test_the_mcp_door_answers_a_stalled_head_or_body_with_a_408(cluster: Cluster) -> None:
    with mcp_door(cluster, MCP_MEDIA_MCP__HEAD_TIMEOUT="1") as (url, token):
        port = urlsplit(url).port
        assert port is not None
        stalled_body = (
            head(
                b"/mcp",
                [
                    b"Authorization: Bearer " + token.encode(),
                    b"Content-Type: application/json",
                    b"Accept: " + ACCEPT.encode(),
                    b"Content-Length: 100",
                ],
                method=b"POST",
                port=port,
            )
            + b'{"jsonrpc": "2.0"'
        )
        for request, says in (
            (_stalled(b"/mcp", port), "head did not arrive within 1 s"),
            (stalled_body, "body stalled for 1 s"),
        ):
            answer = exchange(port, request)
            assert answer.error is None and answer.status == 408, answer
            body = answer.json()
            assert body["id"] is None and says in body["error"]["message"], body
            assert body["error"]["data"] == {"status": 408, "code": "request_timeout"}
        headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
        served_after = httpx2.post(url, json=INITIALIZE, headers=headers, timeout=30)
        assert served_after.status_code == 200, served_after.text[:200]
