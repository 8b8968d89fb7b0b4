"""The ASGI app of `mcp-media serve`: the routes of each part, the key, the error shape."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workers.api import health, metrics, models, page, speech, transcribe
from workers.api.auth import check_bearer, needs_key
from workers.api.context import ApiContext
from workers.api.errors import ApiError
from workers.api.metrics import ApiMetrics
from workers.settings import Settings

if TYPE_CHECKING:
    from workers.client import MediaClient


class KeyGuard:
    """Pure ASGI (streamed responses pass untouched): /v1/* and /metrics need the key."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and needs_key(scope["path"]):
            try:
                check_bearer(Request(scope), self.key)
            except ApiError as exc:
                await exc.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CountRequests:
    """Pure ASGI: counts each answer by route and status code for /metrics."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"].startswith("/v1/") else "other"

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(path, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


def create_app(settings: Settings, key: str, client: MediaClient) -> Starlette:
    """The app of the HTTP door; it holds the cluster's gateway `client` (closed with it)."""
    ctx = ApiContext(settings=settings, key=key, client=client)
    ctx.metrics.watch(client.store)
    routes: list[BaseRoute] = [*health.routes(ctx)]
    routes += [
        *transcribe.routes(ctx),
        *speech.routes(ctx),
        *models.routes(ctx),
        *metrics.routes(ctx),
        *page.routes(ctx),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        client.close()

    app = Starlette(routes=routes, exception_handlers={ApiError: _api_error}, lifespan=lifespan)
    app.add_middleware(KeyGuard, key=key)
    app.add_middleware(CountRequests, metrics=ctx.metrics)  # outermost: refusals count too
    return app
