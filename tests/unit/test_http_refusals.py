"""The MCP HTTP door's refusals: what an app answers in plain text, or with no body, reaches
the client as a JSON-RPC error; JSON answers and successes pass as they were."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest
from starlette.responses import JSONResponse, PlainTextResponse, Response

from workers.doors.mcp.asgi import ASGIApp
from workers.doors.mcp.http_refusals import MAX_TEXT, shape_refusals

pytestmark = pytest.mark.unit


def _answer(app: ASGIApp) -> tuple[int, dict[bytes, bytes], bytes]:
    events: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(event: MutableMapping[str, Any]) -> None:
        events.append(event)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    anyio.run(shape_refusals(app), scope, receive, send)
    start, *bodies = events
    assert start["type"] == "http.response.start"
    body = b"".join(event.get("body", b"") for event in bodies)
    return start["status"], dict(start["headers"]), body


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (PlainTextResponse("Invalid Host header", 421), "Invalid Host header"),
        (PlainTextResponse("Request body too large", 413), "Request body too large"),
        (Response(status_code=406), "Not Acceptable"),
        (Response(status_code=405, headers={"Allow": "POST"}), "Method Not Allowed"),
        (Response(status_code=599), "HTTP 599"),
        (PlainTextResponse("upstream broke", 502), "upstream broke"),
    ],
)
def test_a_plain_refusal_becomes_a_json_rpc_error(response: Response, message: str) -> None:
    status, headers, body = _answer(response)
    assert status == response.status_code
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body)
    answer = json.loads(body)
    assert (answer["jsonrpc"], answer["id"]) == ("2.0", None)
    assert answer["error"]["message"] == message
    assert answer["error"]["data"] == {"status": response.status_code}
    assert answer["error"]["code"] == (-32600 if status < 500 else -32603)
    if status == 405:
        assert headers[b"allow"] == b"POST"  # the other headers stay


def test_a_long_plain_text_is_cut_and_a_streamed_one_is_read_whole() -> None:
    async def streamed(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 400, "headers": []})
        for _ in range(3):
            await send({"type": "http.response.body", "body": b"y" * 3000, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    status, _, body = _answer(streamed)
    assert status == 400
    assert json.loads(body)["error"]["message"] == "y" * MAX_TEXT


@pytest.mark.parametrize(
    "response",
    [
        JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}}, 404),
        PlainTextResponse("fine", 200),
        Response(status_code=202),
    ],
)
def test_json_answers_and_successes_pass_as_they_came(response: Response) -> None:
    status, headers, body = _answer(response)
    assert status == response.status_code
    assert body == response.body
    assert headers == dict(response.raw_headers)
