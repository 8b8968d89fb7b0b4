"""The routes of the jobs page: `/`, `/login`, `/logout`, `/events`, `/static/*`, the cached
media under `/page/media/<sha256>` and the actions under `/page/*` (POST)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files
from pathlib import Path
from typing import ParamSpec, TypeVar
from urllib.parse import quote

from prometheus_client import Gauge
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from pipelines.outcomes import Outcome
from pipelines.sniff import HEAD_BYTES, sniff_audio, sniff_image
from workers.doors.api.bodies import check_form_type
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.outcomes import http_error
from workers.doors.api.page import views
from workers.doors.api.page.board import Board
from workers.doors.api.page.session import COOKIE, CSRF_FIELD, Gate
from workers.doors.api.page.sessions import SessionTable
from workers.doors.api.page.stream import Hub, stream

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_LOGIN_HEADERS = {
    **_HEADERS,
    "Content-Security-Policy": _CSP.replace(
        "style-src 'self'", f"style-src '{views.LOGIN_STYLE_HASH}'"
    ),
}
_STATIC_TYPES = {"page.js": "text/javascript", "page.css": "text/css"}
_STATIC = {
    name: (files("workers.doors.api.page").joinpath("static", name).read_bytes(), kind)
    for name, kind in _STATIC_TYPES.items()
}
MAX_FORM_BYTES = 16 * 1024

Handler = Callable[[Request], Awaitable[Response]]
P = ParamSpec("P")
R = TypeVar("R")


async def on_cluster(
    unavailable: tuple[type[Exception], ...],
    call: Callable[P, R],
    *args: P.args,
    **kwargs: P.kwargs,
) -> R:
    """Run a blocking call on the cluster in a thread; a broker that does not answer (one of
    the gateway's `unavailable` errors) is a 503 with the reason, and the page keeps serving."""
    try:
        return await run_in_threadpool(call, *args, **kwargs)
    except unavailable as exc:
        raise http_error(Outcome.BROKER_UNAVAILABLE, f"the broker does not answer: {exc}") from None


def routes(ctx: ApiContext) -> list[BaseRoute]:
    gate = Gate(ctx.key, SessionTable(ctx.settings.api.page_sessions))
    _watch(ctx, gate)
    client = ctx.client
    assert client is not None, "create_app gives the context its client"
    board = Board(ctx.settings, client)

    async def cluster(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await on_cluster(client.unavailable, call, *args, **kwargs)

    hub = Hub(board)

    async def form(request: Request) -> dict[str, str]:
        if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
            raise ApiError(413, f"a page form is at most {MAX_FORM_BYTES} bytes")
        check_form_type(request.headers.get("content-type", ""))
        data = await request.form(max_files=0, max_fields=20)
        return {k: v for k, v in data.items() if isinstance(v, str)}

    async def index(request: Request) -> Response:
        session = gate.current(request)
        if session is None:
            return RedirectResponse("/login", status_code=303)
        query = request.query_params.get("q", "").strip()[:200]
        found, error = None, None
        if query:
            try:
                found = await cluster(board.search, query)
            except ApiError as exc:
                error = exc.message
        snapshot = await cluster(board.snapshot)
        message = request.query_params.get("msg", "")[:300]
        html = views.page(
            snapshot, session.csrf, query=query, found=found, error=error, message=message
        )
        return HTMLResponse(html, headers=_HEADERS, status_code=400 if error else 200)

    async def login_form(request: Request) -> Response:
        if gate.current(request) is not None:
            return RedirectResponse("/", status_code=303)
        return HTMLResponse(views.login_page(), headers=_LOGIN_HEADERS)

    async def login(request: Request) -> Response:
        gate.check_origin(request)
        wait = gate.wait_before_login(request)  # before the key: the right one waits too
        if wait:
            page = views.login_page(f"too many attempts: try again in {wait} s")
            headers = {**_LOGIN_HEADERS, "Retry-After": str(wait)}
            return HTMLResponse(page, status_code=429, headers=headers)
        given = (await form(request)).get("key", "")
        if not given or not gate.key_matches(given):
            page = views.login_page("wrong key" if given else "enter the key")
            return HTMLResponse(page, status_code=401, headers=_LOGIN_HEADERS)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(**gate.cookie_args(request, gate.table.open()))  # type: ignore[arg-type]
        return response

    async def logout(request: Request) -> Response:
        fields = await form(request)
        session = gate.check_action(request, fields.get(CSRF_FIELD))
        gate.table.close(session.cookie)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def events(request: Request) -> Response:
        session = gate.require(request)
        return StreamingResponse(
            stream(hub, session.csrf),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def static(request: Request) -> Response:
        gate.require(request)
        found = _STATIC.get(request.path_params["name"])
        if found is None:
            raise ApiError(404, "no such asset")
        body, kind = found
        return Response(body, media_type=kind, headers=_HEADERS)

    async def media(request: Request) -> Response:
        gate.require(request)
        sha256 = request.path_params["sha256"]
        path = await run_in_threadpool(board.media_path, sha256)
        if path is None:
            raise ApiError(404, "no cached image or audio file has this sha256", code="not_cached")
        mime = await run_in_threadpool(_media_type, path)
        return FileResponse(
            path,
            media_type=mime,
            headers={
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'; sandbox",
                "Cache-Control": "private, max-age=3600",
                "Content-Disposition": "inline",
            },
        )

    def action(do: Callable[[dict[str, str]], str]) -> Handler:
        async def handle(request: Request) -> Response:
            fields = await form(request)
            gate.check_action(request, fields.get(CSRF_FIELD))
            message = await cluster(do, fields)
            hub.poke()
            if "application/json" in request.headers.get("accept", ""):
                return JSONResponse({"ok": True, "message": message}, status_code=202)
            return RedirectResponse(f"/?msg={quote(message)}", status_code=303)

        return handle

    def reprocess(f: dict[str, str]) -> str:
        return board.reprocess(
            f.get("kind", ""), f.get("mode", ""), f.get("include_degraded") == "1"
        )

    def resize(f: dict[str, str]) -> str:
        try:
            delta = int(f.get("delta", ""))
        except ValueError:
            raise ApiError(400, "delta is +1 or -1") from None
        return board.resize(f.get("worker", ""), delta)

    return [
        Route("/", index, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/events", events, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/page/media/{sha256}", media, methods=["GET"]),
        Route("/page/reprocess", action(reprocess), methods=["POST"]),
        Route(
            "/page/pause", action(lambda f: board.pause(f.get("queue", ""), True)), methods=["POST"]
        ),
        Route(
            "/page/resume",
            action(lambda f: board.pause(f.get("queue", ""), False)),
            methods=["POST"],
        ),
        Route("/page/concurrency", action(resize), methods=["POST"]),
        Route(
            "/page/dead/retry", action(lambda f: board.retry(f.get("job_id", ""))), methods=["POST"]
        ),
        Route(
            "/page/dead/clear",
            action(lambda f: board.clear(None if f.get("all") == "1" else f.get("job_id", ""))),
            methods=["POST"],
        ),
    ]


def _watch(ctx: ApiContext, gate: Gate) -> None:
    """/metrics shows both tables stay bounded."""
    registry = ctx.metrics.registry
    held = Gauge("mcp_media_page_sessions", "Jobs-page sessions held", registry=registry)
    held.set_function(lambda: len(gate.table))
    tried = Gauge(
        "mcp_media_page_login_clients", "Clients with login attempts on record", registry=registry
    )
    tried.set_function(lambda: len(gate.limiter))


def _media_type(path: Path) -> str:
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
    fmt = sniff_image(head) or sniff_audio(head)
    return fmt.mime if fmt is not None else "application/octet-stream"
