"""A scripted agent model behind the OpenAI chat-completions protocol, for driving a real
agent (hermes-agent) end to end: its answers call the scripted tools one at a time, the next
one ends the turn, and every request it got is kept, so a test reads what the agent sent its
model (the tool list, the tool result text the model would have read).

    with ScriptedModel(tool="mcp__shots__screenshot") as model:
        ...  # point the agent at model.base_url
        model.tool_results()  # the `tool` messages' content, in order

Answers plain JSON or, when the request asks for a stream, server-sent events.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

FINAL_TEXT = "Done: the tool answered."
MODEL_NAME = "scripted-agent-model"


@dataclass(frozen=True, slots=True)
class Call:
    tool: str  # hermes names them mcp__<server>__<tool>
    arguments: str = "{}"  # as the JSON text a model sends


class ScriptedModel:
    """The server and its thread; `requests` holds every chat-completions body received."""

    def __init__(self, tool: str, arguments: str = "{}", *then: Call) -> None:
        self.script = (Call(tool, arguments), *then)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._thread.join(5)
        self._httpd.server_close()

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    def tool_names(self) -> list[list[str]]:
        """The tool names offered in each request, in order."""
        return [
            [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
            for body in self.requests
        ]

    def tool_results(self) -> list[str]:
        """The content of every `tool` message of the last request that carried any: what
        the model read of the tool's answer."""
        for body in reversed(self.requests):
            sent = [m for m in body.get("messages", []) if m.get("role") == "tool"]
            if sent:
                return [_text(m.get("content")) for m in sent]
        return []

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for this request: the next scripted call, else the end."""
        with self._lock:
            self._requests.append(body)
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        made = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if made >= len(self.script) or self.script[made].tool not in offered:
            return {"role": "assistant", "content": FINAL_TEXT}
        step = self.script[made]
        call = {
            "id": f"call_{len(self._requests)}",
            "type": "function",
            "function": {"name": step.tool, "arguments": step.arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[_Handler], model: ScriptedModel
    ) -> None:
        self.model = model
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        body = json.loads(raw)
        message = self.server.model.answer(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            self._stream(message, finish)
        else:
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._send(200, {**_envelope("chat.completion"), "choices": [choice], **_USAGE})

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, message: dict[str, Any], finish: str) -> None:
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": 0, **c} for c in message["tool_calls"]]
        chunks = [
            {**_envelope("chat.completion.chunk"), "choices": [{"index": 0, "delta": delta}]},
            {
                **_envelope("chat.completion.chunk"),
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                **_USAGE,
            },
        ]
        data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


_USAGE = {"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _envelope(kind: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": kind,
        "created": int(time.time()),
        "model": MODEL_NAME,
    }
