"""Every refusal of the MCP HTTP door in JSON-RPC's shape.

The SDK and Starlette answer some refusals in plain text or with no body at all: a Host
or Origin refused (421, 403), a Content-Type (400), a body over the cap (413), a method
(405), an Accept header (406), a path (404). A client that reads every answer of an MCP
endpoint as JSON-RPC got a parse error in place of the reason. `shape_refusals` turns
any answer of 400 or more that is not JSON into a JSON-RPC error with a null id, the text
as its message and the status in its data; the status and the other headers stay.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from http import HTTPStatus
from typing import Any

import mcp_types as types

from workers.doors.mcp.asgi import ASGIApp, Receive, Scope, Send

MAX_TEXT = 4096  # of a plain refusal's text, kept in the message


def refusal_body(status: int, message: str, code: str | None = None) -> bytes:
    """A JSON-RPC error with a null id: no request could be read to answer by its id."""
    data: dict[str, Any] = {"status": status}
    if code is not None:
        data["code"] = code
    rpc_code = types.INVALID_REQUEST if status < 500 else types.INTERNAL_ERROR
    error = types.ErrorData(code=rpc_code, message=message, data=data)
    return (
        types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
        .model_dump_json(by_alias=True)
        .encode()
    )


async def send_refusal(
    send: Send,
    status: int,
    message: str,
    *,
    code: str | None = None,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    body = refusal_body(status, message, code)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def shape_refusals(app: ASGIApp) -> ASGIApp:
    async def shaped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        held: MutableMapping[str, Any] | None = None
        text = bytearray()

        async def sent(event: MutableMapping[str, Any]) -> None:
            nonlocal held
            if event["type"] == "http.response.start" and _plain_refusal(event):
                held = event
                return
            if held is None or event["type"] != "http.response.body":
                await send(event)
                return
            text.extend(event.get("body", b"")[: MAX_TEXT - len(text)])
            if event.get("more_body"):
                return
            start, held = held, None
            status = int(start["status"])
            kept = tuple(
                (name, value)
                for name, value in start.get("headers") or []
                if name.lower() not in (b"content-type", b"content-length")
            )
            message = text.decode("utf-8", "replace").strip() or _phrase(status)
            await send_refusal(send, status, message, headers=kept)

        await app(scope, receive, sent)

    return shaped


def _plain_refusal(start: MutableMapping[str, Any]) -> bool:
    if int(start["status"]) < 400:
        return False
    for name, value in start.get("headers") or []:
        if name.lower() == b"content-type":
            return not value.split(b";")[0].strip().lower().endswith(b"json")
    return True


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"
