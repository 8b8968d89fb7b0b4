"""The MCP door over streamable HTTP: loopback by default, a bearer token always.

The token is given, or generated once and kept 0600 in `$MCP_MEDIA_HOME/mcp-token`; a
non-loopback address is refused unless a token is given explicitly. The SDK's transport
security checks Host and Origin (DNS rebinding) and caps request bodies.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings

from workers.listen import ListenError, is_loopback, resolve_secret
from workers.mcp.proxy import Proxy

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 4 * 1024 * 1024
TOKEN_FILE = "mcp-token"  # noqa: S105 - a file name, not a secret


class DoorConfigError(ListenError):
    """The HTTP door cannot start as asked; the message says why."""


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise DoorConfigError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]") or "127.0.0.1", int(port)


def resolve_token(home: Path, given: str | None, host: str) -> str:
    return resolve_secret(home, given, host, file=TOKEN_FILE, how="--token", noun="token")


def require_bearer(app: ASGIApp, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = json.dumps({"error": "missing or wrong bearer token"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="mcp-media"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def security_for(host: str, port: int) -> TransportSecuritySettings:
    names = ["127.0.0.1", "localhost", "[::1]"] if is_loopback(host) else [host]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{port}" for name in names],
        allowed_origins=[f"http://{name}:{port}" for name in names],
    )


async def _serve(proxy: Proxy, host: str, port: int, token: str) -> None:
    import uvicorn

    app = proxy.server.streamable_http_app(
        host=host,
        transport_security=security_for(host, port),
        max_request_body_size=MAX_BODY_BYTES,
    )
    config = uvicorn.Config(
        require_bearer(app, token), host=host, port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tasks:
        await proxy.run_upstreams(tasks)
        try:
            await server.serve()
        finally:
            proxy.stop()
            tasks.cancel_scope.cancel()


def serve_http(proxy: Proxy, host: str, port: int, token: str) -> int:
    try:
        anyio.run(_serve, proxy, host, port, token)
    finally:
        proxy.rewriter.close()
    return 0
