"""The MCP door over streamable HTTP: loopback by default, a bearer token always.

The token is given, or generated once and kept 0600 in `$MCP_MEDIA_HOME/mcp-token`; a
non-loopback address is refused unless a token is given explicitly. Request bodies are
capped. On loopback the SDK's transport security allows only loopback names as Host and
Origin (DNS rebinding); off loopback (an address or a wildcard such as 0.0.0.0) the Host
must be an IP address or this machine's name, at any port, and an Origin must be the one the
request was sent to (`check_host_and_origin`).
"""

from __future__ import annotations

import asyncio
import hmac
from pathlib import Path
from types import FrameType

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from workers.doors.http_heads import HeadLimits, HeadRefusal, head_protocol
from workers.doors.listen import (
    ListenError,
    host_allowed,
    is_loopback,
    machine_names,
    resolve_secret,
)
from workers.doors.mcp.asgi import ASGIApp, Receive, Scope, Send
from workers.doors.mcp.http_refusals import refusal_body, send_refusal, shape_refusals
from workers.doors.mcp.http_requests import guard_requests
from workers.doors.mcp.proxy import Proxy

MAX_BODY_BYTES = 4 * 1024 * 1024
MCP_PATH = "/mcp"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
SHUTDOWN_GRACE = 3  # s a request still running at SIGTERM may take, upstreams stopped
ANSWER_GRACE = 1.0  # s the answers of calls the upstreams' stop ended have to go out
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
    expected = token.encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            # The scheme is case-insensitive (RFC 7235), as `serve` takes it.
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), expected):
                challenge = ((b"www-authenticate", b'Bearer realm="mcp-media"'),)
                await send_refusal(
                    send, 401, "missing or wrong bearer token", code="unauthorized",
                    headers=challenge,
                )  # fmt: skip
                return
        await app(scope, receive, send)

    return guarded


def security_for(host: str, port: int) -> TransportSecuritySettings:
    """The SDK's Host/Origin lists for a loopback bind (DNS-rebinding protection). Off
    loopback the SDK's check is off and `check_host_and_origin` applies instead."""
    if not is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{port}" for name in names],
        allowed_origins=[f"http://{name}:{port}" for name in names],
    )


def check_host_and_origin(
    app: ASGIApp, names: frozenset[str] | None = None, *, addresses: bool = True
) -> ASGIApp:
    """On every path: the Host must name this machine (421), and an Origin, when a browser
    sends one, must be the origin the request was sent to (403). Off loopback the names are
    this machine's own and any address (`addresses`); on loopback only `LOOPBACK_NAMES`.
    DNS rebinding needs a name the attacker controls: an address or this machine's own name
    cannot be one, and the bearer token, which no web page has, guards every request
    besides."""
    known = names if names is not None else machine_names()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            origin = headers.get(b"origin")
            if not host_allowed(host, known, addresses=addresses):
                await send_refusal(send, 421, "Invalid Host header", code="foreign_host")
                return
            if origin is not None and not _same_origin(origin.decode("latin-1"), host):
                await send_refusal(send, 403, "Invalid Origin header", code="foreign_origin")
                return
        await app(scope, receive, send)

    return guarded


def exact_path(app: ASGIApp, path: str) -> ASGIApp:
    """`path` + "/" is `path`: Starlette would redirect it (307, no body, a Location built
    from the client's Host), which a client that POSTs does not follow."""
    slashed = path + "/"

    async def exact(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == slashed:
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await app(scope, receive, send)

    return exact


def _same_origin(origin: str, host: str) -> bool:
    scheme, sep, netloc = origin.strip().lower().partition("://")
    return bool(sep) and scheme in ("http", "https") and netloc == host.strip().lower()


def _refused(refusal: HeadRefusal) -> bytes:
    """A request head refused (too large, malformed)."""
    return refusal_body(refusal.status, f"Invalid Request: {refusal.message}", refusal.code)


def _head_limits(proxy: Proxy) -> HeadLimits:
    limits = proxy.limits
    return HeadLimits(max_bytes=limits.max_header_kb * 1024, seconds=limits.head_timeout)


async def _serve(proxy: Proxy, host: str, port: int, token: str) -> None:
    app = proxy.server.streamable_http_app(
        host=host,
        transport_security=security_for(host, port),
        max_request_body_size=MAX_BODY_BYTES,
        session_idle_timeout=proxy.limits.session_idle_timeout,
        max_sessions=proxy.limits.max_sessions,  # past it: 503 with a JSON-RPC error
    )
    answered = exact_path(guard_requests(app, MAX_BODY_BYTES, proxy.limits.head_timeout), MCP_PATH)
    checked = (
        check_host_and_origin(answered, LOOPBACK_NAMES, addresses=False)
        if is_loopback(host)
        else check_host_and_origin(answered)
    )
    config = uvicorn.Config(
        shape_refusals(require_bearer(checked, token)),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=head_protocol(_head_limits(proxy), _refused),
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    server = _Door(config, proxy)
    async with anyio.create_task_group() as tasks:
        await proxy.run_upstreams(tasks)
        try:
            await server.serve()  # until SIGTERM or SIGINT (uvicorn's own handlers)
        finally:
            await proxy.close()
            tasks.cancel_scope.cancel()


class _Door(uvicorn.Server):
    """uvicorn's server that, told to stop, first stops the upstreams, so that an upstream
    call in flight ends with its error answer (as over stdio), and gives the answers up to
    `ANSWER_GRACE` to go out before the usual shutdown, which sse-starlette starts by
    closing every event stream. Before, a 20 s call held the exit for 19 s and its client
    got no answer; stopping the upstreams without waiting lost the answer one time in three.
    A second signal stops at once."""

    def __init__(self, config: uvicorn.Config, proxy: Proxy) -> None:
        super().__init__(config)
        self.proxy = proxy
        self._draining: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None:
            super().handle_exit(sig, frame)
            return
        self._draining = asyncio.get_running_loop().create_task(self._drain(sig, frame))

    async def _drain(self, sig: int, frame: FrameType | None) -> None:
        try:
            await self.proxy.close()
            with anyio.move_on_after(ANSWER_GRACE):
                while self.server_state.tasks:
                    await anyio.sleep(0.02)
        finally:
            super().handle_exit(sig, frame)


def serve_http(proxy: Proxy, host: str, port: int, token: str) -> int:
    try:
        anyio.run(_serve, proxy, host, port, token)
    finally:
        proxy.rewriter.close()
    return 0
