"""The ASGI app of `mcp-media serve`: the routes of each part, the key, the error shape."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from workers.api import health, page
from workers.api.auth import check_bearer, needs_key
from workers.api.context import ApiContext
from workers.api.errors import ApiError
from workers.settings import Settings


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


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


def create_app(settings: Settings, key: str) -> Starlette:
    ctx = ApiContext(settings=settings, key=key)
    routes: list[BaseRoute] = [*health.routes(ctx), *page.routes(ctx)]
    app = Starlette(routes=routes, exception_handlers={ApiError: _api_error})
    app.add_middleware(KeyGuard, key=key)
    return app
