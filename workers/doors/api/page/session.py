"""The page's login: a random session per login, a CSRF token per session, attempts limited.

The cookie holds a random session id (see `sessions`), never the key nor anything derived
from it: it cannot be replayed as a bearer key on /v1, differs for every login and names
nothing once its owner logs out. It is HttpOnly, SameSite=Strict, Path=/ (Secure behind
https) and lasts as long as the session. Every action also needs that session's CSRF token
(in the `X-CSRF-Token` header or a `csrf` form field), and a request whose Origin names
another site is refused. Login attempts are limited per client (see `limiter`).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import Request

from workers.doors.api.errors import ApiError
from workers.doors.api.page.limiter import LoginLimiter
from workers.doors.api.page.sessions import PageSession, SessionTable

COOKIE = "mcp_media_page"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"


class Gate:
    """What the key lets a browser do: open a session, hold its cookie, sign its actions."""

    def __init__(
        self, key: str, table: SessionTable | None = None, limiter: LoginLimiter | None = None
    ) -> None:
        self.key = key
        self.table = table if table is not None else SessionTable()
        self.limiter = limiter if limiter is not None else LoginLimiter()

    def wait_before_login(self, request: Request) -> int:
        """Spend one login attempt of this client: 0, or the seconds it must wait first."""
        return self.limiter.take(request.client.host if request.client else None)

    def key_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.strip().encode(), self.key.encode())

    def current(self, request: Request) -> PageSession | None:
        return self.table.get(request.cookies.get(COOKIE, ""))

    def require(self, request: Request) -> PageSession:
        session = self.current(request)
        if session is None:
            raise ApiError(401, "log in on the jobs page first (/login)", code="not_logged_in")
        return session

    def check_origin(self, request: Request) -> None:
        """A browser names the page that sent a POST: it must be this one."""
        origin = request.headers.get("origin")
        if origin is None:  # not sent: a same-origin GET-made form in old browsers, or curl
            return
        if urlsplit(origin).netloc != request.headers.get("host", ""):
            raise ApiError(403, f"cross-site request refused (Origin {origin[:100]})", code="csrf")

    def check_action(self, request: Request, form_token: str | None) -> PageSession:
        """An action needs a live session, this site as Origin, and that session's token."""
        session = self.require(request)
        self.check_origin(request)
        given = request.headers.get(CSRF_HEADER) or form_token or ""
        if not hmac.compare_digest(given.encode(), session.csrf.encode()):
            raise ApiError(403, "missing or wrong CSRF token: reload the page", code="csrf")
        return session

    def cookie_args(self, request: Request, session: PageSession) -> dict[str, object]:
        return {
            "key": COOKIE,
            "value": session.cookie,
            "max_age": int(self.table.lifetime),
            "path": "/",
            "httponly": True,
            "samesite": "strict",
            "secure": request.url.scheme == "https",
        }
