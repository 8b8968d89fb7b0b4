"""An MCP server over HTTP for the proxy tests, written by hand (no SDK) so that it can stream
an answer of any size without holding it: a starlette app on uvicorn.

python -m tests.support.http_upstream PORT

Endpoints (one server, every transport):
  /json   streamable HTTP, each answer a JSON body
  /sse    streamable HTTP, each answer an SSE event on the POST's response
  /legacy the 2024-11-05 SSE transport: GET /legacy opens the event stream (its first event
          names the POST endpoint), POST /legacy/messages?session=ID sends, answers come as
          events on that stream

Tools (tools/call name -> what comes back):
  who                 text "http"
  big {megabytes}     one text block of that many MiB of "a", streamed 1 MiB at a time
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

CHUNK = 1024 * 1024
TOOLS = [
    {"name": "who", "inputSchema": {"type": "object"}},
    {
        "name": "big",
        "inputSchema": {"type": "object", "properties": {"megabytes": {"type": "number"}}},
    },
]
sessions: dict[str, asyncio.Queue[list[bytes] | Iterator[bytes]]] = {}


def answer(message: dict[str, Any]) -> Iterator[bytes]:
    """The JSON-RPC response to `message`, in pieces (a `big` one never held whole)."""
    rid = json.dumps(message.get("id")).encode()
    method = message.get("method")
    params = message.get("params") or {}
    if method == "tools/call" and params.get("name") == "big":
        size = int(float(params.get("arguments", {}).get("megabytes", 1)) * CHUNK)
        yield b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text","text":"'
        for start in range(0, size, CHUNK):
            yield b"a" * min(CHUNK, size - start)
        yield b'"}]}}'
        return
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "http-upstream", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "who":
        result = {"content": [{"type": "text", "text": "http"}]}
    else:
        result = {}
    yield json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result}).encode()


def event(pieces: Iterator[bytes]) -> Iterator[bytes]:
    yield b"event: message\r\ndata: "
    yield from pieces
    yield b"\r\n\r\n"


async def streamable(request: Request) -> Response:
    if request.method == "GET":
        return Response(status_code=405)
    if request.method == "DELETE":
        return Response(status_code=200)
    message = json.loads(await request.body())
    if "id" not in message:
        return Response(status_code=202)
    headers = {"mcp-session-id": "s1"}
    if request.url.path == "/sse":
        sse = event(answer(message))
        return StreamingResponse(sse, media_type="text/event-stream", headers=headers)
    return StreamingResponse(answer(message), media_type="application/json", headers=headers)


async def legacy_stream(request: Request) -> Response:
    session = secrets.token_hex(8)
    queue: asyncio.Queue[list[bytes] | Iterator[bytes]] = asyncio.Queue()
    sessions[session] = queue

    async def events() -> AsyncIterator[bytes]:
        yield f"event: endpoint\r\ndata: /legacy/messages?session={session}\r\n\r\n".encode()
        while True:
            for piece in await queue.get():
                yield piece

    return StreamingResponse(events(), media_type="text/event-stream")


async def legacy_post(request: Request) -> Response:
    queue = sessions.get(request.query_params.get("session", ""))
    if queue is None:
        return Response(status_code=404)
    message = json.loads(await request.body())
    if "id" in message:
        await queue.put(event(answer(message)))
    return Response(status_code=202)


app = Starlette(
    routes=[
        Route("/json", streamable, methods=["GET", "POST", "DELETE"]),
        Route("/sse", streamable, methods=["GET", "POST", "DELETE"]),
        Route("/legacy", legacy_stream, methods=["GET"]),
        Route("/legacy/messages", legacy_post, methods=["POST"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
