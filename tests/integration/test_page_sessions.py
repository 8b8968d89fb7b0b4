"""The jobs page's sessions against a real `mcp-media serve`: a random session per login that
logout ends, a CSRF token per session, login attempts limited per client, a bounded table."""

from __future__ import annotations

import re

import httpx2
import pytest

from tests.integration.conftest import Cluster
from tests.support.serve import Served, serve

pytestmark = pytest.mark.integration

COOKIE = "mcp_media_page"


def client(served: Served, source: str = "127.0.0.1") -> httpx2.Client:
    """A client without a cookie jar, from `source` (any 127/8 address reaches loopback)."""
    transport = httpx2.HTTPTransport(local_address=source)
    return httpx2.Client(
        base_url=served.url, timeout=30, follow_redirects=False, transport=transport
    )


def log_in(http: httpx2.Client, key: str) -> str:
    answer = http.post("/login", data={"key": key})
    assert answer.status_code == 303, answer.text[:300]
    return answer.cookies[COOKIE]


def token_of(http: httpx2.Client, cookie: str) -> str:
    page = http.get("/", headers=jar(cookie))
    assert page.status_code == 200
    return page.text.split('name="csrf" content="', 1)[1].split('"', 1)[0]


def jar(cookie: str) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={cookie}"}


def test_each_login_is_its_own_session_with_its_own_token_and_logout_ends_it(
    cluster: Cluster,
) -> None:
    with serve(cluster) as served, client(served) as http:
        first = http.post("/login", data={"key": served.key})
        set_cookie = first.headers["set-cookie"]
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
        assert "Path=/" in set_cookie and "Secure" not in set_cookie  # plain http here
        assert re.search(r"Max-Age=604800\b", set_cookie), set_cookie  # the session's life
        a, b = first.cookies[COOKIE], log_in(http, served.key)
        assert a != b and served.key not in a
        token_a, token_b = token_of(http, a), token_of(http, b)
        assert token_a != token_b

        # Session A's token is refused in session B, on an action and on logout.
        for path, data in (("/page/pause", {"queue": "nope"}), ("/logout", {})):
            crossed = http.post(path, data={**data, "csrf": token_a}, headers=jar(b))
            assert crossed.status_code == 403, path
            assert crossed.json()["error"]["code"] == "csrf"
        own = http.post("/page/pause", data={"queue": "nope", "csrf": token_b}, headers=jar(b))
        assert own.status_code == 400 and "unknown queue" in own.text  # past the checks

        out = http.post("/logout", data={"csrf": token_a}, headers=jar(a))
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert f"{COOKIE}=" in out.headers["set-cookie"]  # the browser is told to drop it
        # The old cookie names nothing now, even replayed with its token.
        assert http.get("/", headers=jar(a)).status_code == 303
        assert http.get("/events", headers=jar(a)).status_code == 401
        replayed = http.post("/page/pause", data={"queue": "nope", "csrf": token_a}, headers=jar(a))
        assert replayed.status_code == 401
        assert replayed.json()["error"]["code"] == "not_logged_in"
        assert http.post("/logout", data={"csrf": token_a}, headers=jar(a)).status_code == 401
        # B is untouched.
        assert http.get("/", headers=jar(b)).status_code == 200


def test_login_attempts_are_limited_per_client_and_the_right_key_waits_too(
    cluster: Cluster,
) -> None:
    with serve(cluster) as served, client(served) as http, client(served, "127.0.0.2") as other:
        for attempt in range(30):
            wrong = http.post("/login", data={"key": f"wrong-key-{attempt:04d}-wrong"})
            assert wrong.status_code == 401, attempt
        limited = http.post("/login", data={"key": "wrong-key-0031-wrong"})
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert "too many attempts" in limited.text
        right = http.post("/login", data={"key": served.key})
        assert right.status_code == 429 and COOKIE not in right.headers.get("set-cookie", "")
        # A client cannot name another address of its own: no proxy is trusted by default.
        spoofed = http.post(
            "/login", data={"key": "x" * 20}, headers={"X-Forwarded-For": "10.1.2.3"}
        )
        assert spoofed.status_code == 429

        # Another client is not held back, and its login frees nobody else.
        assert log_in(other, served.key)
        assert http.post("/login", data={"key": served.key}).status_code == 429


def test_the_session_table_stays_bounded_after_many_logins(cluster: Cluster) -> None:
    with serve(cluster, MCP_MEDIA_API__PAGE_SESSIONS="3") as served, client(served) as http:
        cookies = [log_in(http, served.key) for _ in range(10)]
        assert len(set(cookies)) == 10
        held = [http.get("/", headers=jar(c)).status_code == 200 for c in cookies]
        assert held == [False] * 7 + [True] * 3  # the oldest logins were logged out
        auth = {"Authorization": f"Bearer {served.key}"}
        metrics = http.get("/metrics", headers=auth).text
        assert "mcp_media_page_sessions 3.0" in metrics
        assert "mcp_media_page_login_clients 1.0" in metrics


def test_behind_a_trusted_proxy_clients_are_told_apart_and_https_makes_the_cookie_secure(
    cluster: Cluster,
) -> None:
    with (
        serve(cluster, MCP_MEDIA_API__TRUSTED_PROXIES="127.0.0.1") as served,
        client(served) as proxy,
    ):
        first = {"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "https"}
        second = {"X-Forwarded-For": "198.51.100.8", "X-Forwarded-Proto": "https"}
        for _ in range(30):
            assert proxy.post("/login", data={"key": "y" * 20}, headers=first).status_code == 401
        assert proxy.post("/login", data={"key": "y" * 20}, headers=first).status_code == 429
        good = proxy.post("/login", data={"key": served.key}, headers=second)
        assert good.status_code == 303
        assert "Secure" in good.headers["set-cookie"]
