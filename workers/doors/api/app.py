"""The ASGI app of `mcp-media serve`: the routes of each part, the key, the error shape."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from workers.core.cluster_view import ClusterView
from workers.core.gateway import JobGateway
from workers.core.operations import ClusterSteering
from workers.core.settings import Settings
from workers.core.speech_scoring import SpeechScoring
from workers.doors.api import health, metrics, models, page, realtime, speech, transcribe
from workers.doors.api.auth import CATALOG_PATHS, check_bearer, needs_key
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError, refuse_upgrade
from workers.doors.api.metrics import ApiMetrics
from workers.doors.http_heads import HeadLimits, HeadRefusal, head_protocol
from workers.doors.listen import LOOPBACK_NAMES, host_allowed, is_loopback, machine_names

log = logging.getLogger(__name__)


class KeyGuard:
    """Pure ASGI (streamed responses pass untouched): /v1/* and /metrics need the key, but
    the `open` paths."""

    def __init__(self, app: ASGIApp, key: str, open_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.key = key
        self.open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and needs_key(path) and path not in self.open:
            try:
                check_bearer(Request(scope), self.key)
            except ApiError as exc:
                await exc.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CountRequests:
    """Pure ASGI: counts each answer by route and status code for /metrics. The route is one
    of the app's own paths, every other path is `other`: a client cannot add series."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics, known: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in self.known else "other"

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(path, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)


class ShapedErrors:
    """Pure ASGI: an error under any route that `fault` names (a full disk, a broker gone)
    is its shaped answer, logged in one line; any other is an OpenAI-shaped 500 naming a
    request id, the traceback in the log under that id, never to the client."""

    def __init__(self, app: ASGIApp, fault: Callable[[BaseException], ApiError | None]) -> None:
        self.app = app
        self.fault = fault

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            shaped = self.fault(exc)
            if shaped is not None:
                log.warning(
                    "request %s %s: %s (%s)", scope.get("method"), scope["path"],
                    shaped.status, shaped.message,
                )  # fmt: skip
                if started:
                    raise
                await shaped.response()(scope, receive, send)
                return
            request_id = secrets.token_hex(8)
            log.exception(
                "request %s %s failed (request id %s)",
                scope.get("method"),
                scope["path"],
                request_id,
            )
            if started:
                raise  # the answer is under way: the server closes the connection
            error = ApiError(
                500,
                f"internal error (request id {request_id}); the server log has the details",
                code="internal_error",
                headers={"x-request-id": request_id},
            )
            await error.response()(scope, receive, send)


class HostGuard:
    """Pure ASGI: the Host must name this server (DNS rebinding): on a loopback bind one of
    its loopback names, else an address or this machine's name; any port. 421 otherwise."""

    def __init__(self, app: ASGIApp, loopback: bool) -> None:
        self.app = app
        self.loopback = loopback
        self.names = LOOPBACK_NAMES if loopback else machine_names()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # WebSocket upgrades too: a page rebound to 127.0.0.1 may open the Realtime socket.
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            if not host_allowed(host, self.names, addresses=not self.loopback):
                error = ApiError(421, f"invalid Host header {host[:100]!r}", code="invalid_host")
                if scope["type"] == "http":
                    await error.response()(scope, receive, send)
                else:
                    await refuse_upgrade(WebSocket(scope, receive, send), error)
                return
        await self.app(scope, receive, send)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


def http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the request head bounded, refusals in the OpenAI shape."""

    def shape(refusal: HeadRefusal) -> bytes:
        return bytes(ApiError(refusal.status, refusal.message, code=refusal.code).response().body)

    limits = HeadLimits(
        max_bytes=settings.api.max_header_kb * 1024, seconds=settings.api.head_timeout
    )
    return head_protocol(limits, shape)


def _no_page() -> list[BaseRoute]:
    """Where the jobs page would be: a 404 that says why, in the door's shape."""

    async def absent(request: Request) -> Response:
        raise ApiError(
            404,
            "no jobs page here: this server runs its jobs in its own process (serve --inline);"
            " `mcp-media serve` beside a broker and workers shows and steers them",
            code="no_jobs_page",
        )

    return [Route(path, absent, methods=["GET", "POST"]) for path in ("/", "/login")]


def create_app(
    settings: Settings,
    key: str,
    gateway: JobGateway,
    host: str = "127.0.0.1",
    view: ClusterView | None = None,
    steering: ClusterSteering | None = None,
    scoring: SpeechScoring | None = None,
) -> Starlette:
    """The app of the HTTP door, listening on `host`; every job goes through `gateway`
    (closed with the app). `view`: the cluster `/metrics` reports and the jobs page shows,
    `steering`: what the page changes in it (both: the page is served); `scoring`: the VAD
    model Realtime sessions' server VAD runs (None: turns end on the client's commit)."""
    ctx = ApiContext(settings=settings, key=key, gateway=gateway, scoring=scoring)
    routes: list[BaseRoute] = [*health.routes(ctx)]
    routes += [*transcribe.routes(ctx), *speech.routes(ctx), *models.routes(ctx)]
    routes += metrics.routes(ctx.metrics)
    routes += realtime.routes(ctx)
    if view is not None:
        ctx.metrics.watch(view)
    if view is not None and steering is not None:
        routes += page.routes(ctx, view, steering)
    else:
        routes += _no_page()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        gateway.close(finish_jobs=True)

    app = Starlette(routes=routes, exception_handlers={ApiError: _api_error}, lifespan=lifespan)
    known = frozenset(route.path for route in routes if isinstance(route, Route))
    app.add_middleware(ShapedErrors, fault=ctx.fault)
    public = settings.api.public_catalog and is_loopback(host)
    app.add_middleware(KeyGuard, key=key, open_paths=CATALOG_PATHS if public else frozenset())
    app.add_middleware(HostGuard, loopback=is_loopback(host))
    app.add_middleware(CountRequests, metrics=ctx.metrics, known=known)  # refusals count too
    return app
