"""Every POSTed request answered or cancelled: the HTTP door's guard in front of the SDK.

- A request whose id the SDK cannot answer (`{"a":1}`, `1e999`, `true`, an array) would
  be taken for a notification, 202 and dropped: it gets 400 and Invalid Request (-32600)
  with a null id.
- A client that goes away before its body has come is not handed on (the SDK logged each
  one as an error with a traceback).
- A client that goes away before its answer (the 2025-era SSE response closed) leaves its
  request running, upstream calls included: the guard sends the session the
  `notifications/cancelled` the client did not, so the handler stops and the proxy's
  upstream call is cancelled with it.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import anyio
import mcp_types as types

from workers.doors.mcp.asgi import ASGIApp, Receive, Scope, Send
from workers.doors.mcp.early_answers import valid_id
from workers.doors.mcp.envelope import read_message
from workers.doors.mcp.http_refusals import send_refusal


def guard_requests(app: ASGIApp, max_body: int, seconds: float) -> ASGIApp:
    """The body (up to `max_body`; a larger one goes on to the SDK's own 413) is read
    first, each piece within `seconds` of the one before (else 408), checked, and handed
    on as it came."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        try:
            held, body = await _read_body(receive, max_body, seconds)
        except TimeoutError:
            stalled = f"Invalid Request: the body stalled for {seconds:g} s"
            await send_refusal(send, 408, stalled, code="request_timeout")
            return
        if held[-1]["type"] == "http.disconnect":
            return  # the client left before its body had come: no one to answer
        request_id = None
        if body is not None and body.strip():
            message, refused = read_message(body)
            if refused is not None and refused.error.code == types.INVALID_REQUEST:
                await send_refusal(send, 400, refused.error.message)
                return  # a parse error gets the SDK's own 400
            if isinstance(message, dict) and "method" in message and valid_id(message.get("id")):
                request_id = message["id"]
        disconnected = finished = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal disconnected
            event = held.pop(0) if held else await receive()
            disconnected = disconnected or event["type"] == "http.disconnect"
            return event

        async def sent(event: MutableMapping[str, Any]) -> None:
            nonlocal finished
            if event["type"] == "http.response.body" and not event.get("more_body"):
                finished = True
            await send(event)

        await app(scope, replay, sent)
        if request_id is not None and disconnected and not finished:
            await _cancel(app, scope, request_id)

    return guarded


async def _read_body(
    receive: Receive, max_body: int, seconds: float
) -> tuple[list[MutableMapping[str, Any]], bytes | None]:
    """The events read, and the whole body (None when over `max_body` or cut off);
    TimeoutError when a piece takes over `seconds`."""
    held: list[MutableMapping[str, Any]] = []
    size = 0
    while True:
        with anyio.fail_after(seconds):
            event = await receive()
        held.append(event)
        size += len(event.get("body", b""))
        if event["type"] != "http.request" or not event.get("more_body") or size > max_body:
            break
    last = held[-1]
    if last["type"] != "http.request" or last.get("more_body"):
        return held, None
    return held, b"".join(event.get("body", b"") for event in held)


async def _cancel(app: ASGIApp, scope: Scope, request_id: types.RequestId) -> None:
    """POST the session a notifications/cancelled for `request_id`, as its client would
    have: same path and headers (token, session id, protocol version); the reply is dropped."""
    params = {"requestId": request_id, "reason": "the client disconnected"}
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    data = body.encode()
    headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(data)).encode()))
    events = [{"type": "http.request", "body": data, "more_body": False}]

    async def receive() -> MutableMapping[str, Any]:
        return events.pop(0) if events else {"type": "http.disconnect"}

    async def discard(event: MutableMapping[str, Any]) -> None:
        return None

    await app({**scope, "headers": headers}, receive, discard)
