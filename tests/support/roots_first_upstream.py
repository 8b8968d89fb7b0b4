"""An MCP server (plain JSON-RPC on stdio, no SDK) that asks the client for its roots once
initialized, and lists its tools only after the answer: an upstream whose listing waits for
the client behind the proxy.

python -m tests.support.roots_first_upstream
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [{"name": "where", "description": "The first root.", "inputSchema": {"type": "object"}}]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main() -> None:
    roots: list[Any] | None = None
    waiting: list[Any] = []  # tools/list ids asked before the roots came
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "roots-first", "version": "1"},
            }
            send({"id": message["id"], "result": result})
        elif method == "notifications/initialized":
            send({"id": "roots-1", "method": "roots/list"})
        elif method is None and message.get("id") == "roots-1":
            roots = message.get("result", {}).get("roots", [])
            for request_id in waiting:
                send({"id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/list":
            if roots is None:
                waiting.append(message["id"])
            else:
                send({"id": message["id"], "result": {"tools": TOOLS}})
        elif method == "tools/call":
            text = roots[0]["uri"] if roots else "none"
            send({"id": message["id"], "result": {"content": [{"type": "text", "text": text}]}})
        elif "id" in message and method is not None:
            send({"id": message["id"], "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()
