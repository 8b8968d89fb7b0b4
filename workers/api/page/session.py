"""The page's login: a cookie derived from the API key, and a CSRF token for every action.

The cookie holds an HMAC of the key, never the key: it cannot be replayed as a bearer key on
/v1. It is HttpOnly and SameSite=Strict (Secure behind https). Every action also needs the
CSRF token (in the `X-CSRF-Token` header or a `csrf` form field), and a request whose Origin
names another site is refused. Rotating the key logs every browser out.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from starlette.requests import Request

from workers.api.errors import ApiError

COOKIE = "mcp_media_page"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
COOKIE_MAX_AGE = 7 * 24 * 3600


def _derive(key: str, purpose: str) -> str:
    return hmac.new(
        key.encode(), f"mcp-media page {purpose} v1".encode(), hashlib.sha256
    ).hexdigest()


class Session:
    """What the key lets a browser do: hold the cookie, sign actions with the token."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.cookie_value = _derive(key, "session")
        self.csrf = _derive(key, "csrf")

    def key_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.strip().encode(), self.key.encode())

    def logged_in(self, request: Request) -> bool:
        given = request.cookies.get(COOKIE, "")
        return bool(given) and hmac.compare_digest(given.encode(), self.cookie_value.encode())

    def require(self, request: Request) -> None:
        if not self.logged_in(request):
            raise ApiError(401, "log in on the jobs page first (/login)", code="not_logged_in")

    def check_origin(self, request: Request) -> None:
        """A browser names the page that sent a POST: it must be this one."""
        origin = request.headers.get("origin")
        if origin is None:  # not sent: a same-origin GET-made form in old browsers, or curl
            return
        if urlsplit(origin).netloc != request.headers.get("host", ""):
            raise ApiError(403, f"cross-site request refused (Origin {origin[:100]})", code="csrf")

    def check_action(self, request: Request, form_token: str | None) -> None:
        """An action needs the cookie, this site as Origin, and the CSRF token."""
        self.require(request)
        self.check_origin(request)
        given = request.headers.get(CSRF_HEADER) or form_token or ""
        if not hmac.compare_digest(given.encode(), self.csrf.encode()):
            raise ApiError(403, "missing or wrong CSRF token: reload the page", code="csrf")

    def cookie_args(self, request: Request) -> dict[str, object]:
        return {
            "key": COOKIE,
            "value": self.cookie_value,
            "max_age": COOKIE_MAX_AGE,
            "path": "/",
            "httponly": True,
            "samesite": "strict",
            "secure": request.url.scheme == "https",
        }
