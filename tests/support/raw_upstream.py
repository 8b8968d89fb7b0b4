"""A hostile MCP server for the proxy tests, speaking JSON-RPC on stdio by hand (no SDK), so
it can send what an SDK server never would: huge lines, JSON nested past any parser's
depth, silence.

python -m tests.support.raw_upstream MARKER_DIR

Tools (tools/call name -> what comes back):
  who                 text "raw"
  big {megabytes}     an embedded blob of that many MiB (base64: 4/3 as many); writes
                      MARKER_DIR/big-started first
  deep {depth}        structuredContent nested `depth` arrays deep, its id first in the line
  deep_id_last        the same, its id last (beyond any bounded scan)
  silent              no answer, ever; a notifications/cancelled for it writes
                      MARKER_DIR/cancelled-<request id>
  slow {steps}        a progress notification each second for `steps` seconds, then "done"
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

MARKERS = Path(sys.argv[1])
TOOLS = ["who", "big", "deep", "deep_id_last", "silent", "slow"]


def send(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.flush()


def result(request_id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}


def deep(request_id: Any, depth: int, id_last: bool) -> None:
    nested = "[" * depth + "]" * depth
    body = f'{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{{"x":{nested}}}}}'
    rid = json.dumps(request_id)
    line = (
        f'{{"jsonrpc":"2.0","result":{body},"id":{rid}}}'
        if id_last
        else f'{{"jsonrpc":"2.0","id":{rid},"result":{body}}}'
    )
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def big(request_id: Any, megabytes: float) -> None:
    (MARKERS / "big-started").write_text("1")
    blob = base64.b64encode(b"%PDF-1.4\n" + b"\1" * int(megabytes * 1024 * 1024)).decode()
    resource = {"uri": "raw://big.bin", "mimeType": "application/octet-stream", "blob": blob}
    result(request_id, {"content": [{"type": "resource", "resource": resource}]})


def call(request_id: Any, params: dict[str, Any]) -> None:
    name, args = params.get("name"), params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "who":
        result(request_id, text("raw"))
    elif name == "big":
        big(request_id, float(args.get("megabytes", 45)))
    elif name in ("deep", "deep_id_last"):
        deep(request_id, int(args.get("depth", 100_000)), name == "deep_id_last")
    elif name == "slow":
        for step in range(int(args.get("steps", 3))):
            time.sleep(1)
            progress = {"progressToken": token, "progress": step + 1}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        result(request_id, text("done"))
    elif name != "silent":
        error = {"code": -32602, "message": f"unknown tool {name}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            result(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        elif method == "tools/list":
            schema = {"type": "object"}
            tools = [{"name": name, "inputSchema": schema} for name in TOOLS]
            result(request_id, {"tools": tools})
        elif method == "tools/call":
            call(request_id, params)
        elif method == "notifications/cancelled":
            (MARKERS / f"cancelled-{params.get('requestId')}").write_text("1")
        elif request_id is not None:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    main()
