"""An MCP server for the proxy tests whose changes come on their own, not from a call: every
0.2 s it says its tool list changed and that each resource subscribed in its session was
updated. Handshake era only, JSON-RPC on stdio by hand (no SDK).

python -m tests.support.ticking_upstream

Resources: `tick://a` and `tick://b` (any `tick://` URI can be subscribed and read).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

TICK_S = 0.2
_lock = threading.Lock()
_subscribed: set[str] = set()


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message).encode() + b"\n"
    with _lock:
        sys.stdout.buffer.write(line)
        sys.stdout.flush()


def notify(method: str, params: dict[str, Any] | None = None) -> None:
    send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})


def tick() -> None:
    while True:
        time.sleep(TICK_S)
        notify("notifications/tools/list_changed")
        with _lock:
            uris = sorted(_subscribed)
        for uri in uris:
            notify("notifications/resources/updated", {"uri": uri})


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    uri = str(params.get("uri", ""))
    if method == "initialize":
        capabilities = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
        return {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": capabilities,
            "serverInfo": {"name": "ticking", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "tick", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "tick"}]}
    if method == "resources/list":
        return {"resources": [{"uri": f"tick://{n}", "name": n} for n in ("a", "b")]}
    if method == "resources/read" and uri.startswith("tick://"):
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": str(time.time())}]}
    if method in ("resources/subscribe", "resources/unsubscribe") and uri.startswith("tick://"):
        with _lock:
            (_subscribed.add if method == "resources/subscribe" else _subscribed.discard)(uri)
        return {}
    if method == "ping":
        return {}
    return None


def main() -> None:
    threading.Thread(target=tick, daemon=True).start()
    for line in sys.stdin:
        message = json.loads(line)
        request_id = message.get("id")
        if request_id is None:
            continue  # a notification
        method = message.get("method", "")
        result = answer(method, message.get("params") or {})
        if result is None:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
