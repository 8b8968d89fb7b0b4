"""The jobs page's sessions and login limiter, without services: a random session per login
that logout ends, a CSRF token per session, bounded tables, attempts limited per client."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from workers.doors.api.errors import ApiError
from workers.doors.api.page.limiter import OVERFLOW, LoginLimiter, client_key
from workers.doors.api.page.session import COOKIE, Gate
from workers.doors.api.page.sessions import SessionTable

pytestmark = pytest.mark.unit

KEY = "k" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(cookie: str | None = None, client: str = "127.0.0.1", **headers: str) -> Request:
    raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    raw.append((b"host", b"127.0.0.1:8000"))
    if cookie is not None:
        raw.append((b"cookie", f"{COOKIE}={cookie}".encode()))
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/page/pause",
        "headers": raw,
        "client": (client, 40000),
    }
    return Request(scope)


def test_each_login_is_its_own_random_session_with_its_own_token() -> None:
    table = SessionTable()
    one, two = table.open(), table.open()
    assert len({one.cookie, two.cookie, one.csrf, two.csrf}) == 4
    assert all(len(value) >= 40 and KEY not in value for value in (one.cookie, one.csrf))
    assert table.get(one.cookie) == one and table.get(two.cookie) == two
    assert table.get("") is None and table.get(KEY) is None and table.get("é\udc80") is None


def test_logout_and_expiry_end_a_session_and_the_table_stays_bounded() -> None:
    clock = Clock()
    table = SessionTable(cap=3, lifetime=100.0, clock=clock)
    first = table.open()
    table.close(first.cookie)
    assert table.get(first.cookie) is None and len(table) == 0
    table.close(first.cookie)  # twice is fine

    sessions = [table.open() for _ in range(10)]
    assert len(table) == 3  # past the cap the oldest logins are logged out
    assert [table.get(s.cookie) is not None for s in sessions] == [False] * 7 + [True] * 3

    clock.now += 100.0
    assert table.get(sessions[-1].cookie) is None  # expired, even before it is pruned
    fresh = table.open()
    assert len(table) == 1 and table.get(fresh.cookie) == fresh  # expired ones pruned


def test_a_cookie_and_token_are_checked_against_their_own_session() -> None:
    gate = Gate(KEY, SessionTable(cap=2))
    a, b = gate.table.open(), gate.table.open()
    assert gate.key_matches(f" {KEY}\n") and not gate.key_matches("x" * 32)
    assert gate.current(request(a.cookie)) == a and gate.current(request(KEY)) is None
    assert gate.check_action(request(a.cookie, x_csrf_token=a.csrf), None) == a
    assert gate.check_action(request(b.cookie), b.csrf) == b
    assert gate.check_action(request(a.cookie, origin="http://127.0.0.1:8000"), a.csrf) == a
    refusals = [
        (request(), a.csrf, 401),
        (request(a.cookie), None, 403),
        (request(a.cookie), b.csrf, 403),  # session B's token in session A
        (request(b.cookie, x_csrf_token=a.csrf), None, 403),
        (request(a.cookie), "0" * 64, 403),
        (request(a.cookie, origin="http://evil.example"), a.csrf, 403),
        (request(a.cookie, origin="null"), a.csrf, 403),
    ]
    for req, token, status in refusals:
        with pytest.raises(ApiError) as refused:
            gate.check_action(req, token)
        assert refused.value.status == status
    gate.table.close(b.cookie)
    gate.table.open()
    gate.table.open()  # past the cap of this gate's table: A, the oldest, is logged out
    for req, token in ((request(b.cookie), b.csrf), (request(a.cookie), a.csrf)):
        with pytest.raises(ApiError) as logged_out:
            gate.check_action(req, token)
        assert logged_out.value.status == 401
    args = gate.cookie_args(request(), a)
    assert args["value"] == a.cookie and args["max_age"] == int(gate.table.lifetime)
    assert args["httponly"] is True and args["samesite"] == "strict" and args["path"] == "/"
    assert args["secure"] is False


def test_login_attempts_are_limited_per_client_and_refill() -> None:
    clock = Clock()
    limiter = LoginLimiter(burst=30, refill_seconds=2.0, clock=clock)
    assert [limiter.take("10.0.0.1") for _ in range(30)] == [0] * 30
    assert limiter.take("10.0.0.1") == 2  # the 31st waits for one token
    assert limiter.take("10.0.0.2") == 0  # another client is not held back
    assert limiter.take("10.0.0.1") == 2  # refused attempts keep it waiting
    clock.now += 2.0
    assert limiter.take("10.0.0.1") == 0
    assert limiter.take("10.0.0.1") == 2
    clock.now += 0.5
    assert limiter.take("10.0.0.1") == 2  # 1.5 s to go: Retry-After is whole seconds, rounded up
    clock.now += 1.0
    assert limiter.take("10.0.0.1") == 1  # 0.5 s to go: at least 1


def test_the_limiter_table_is_bounded_and_newcomers_past_it_share_one_bucket() -> None:
    clock = Clock()
    limiter = LoginLimiter(burst=2, refill_seconds=10.0, cap=4, clock=clock)
    for i in range(4):
        assert limiter.take(f"10.0.1.{i}") == 0
    assert len(limiter) == 4
    assert [limiter.take(f"10.0.2.{i}") for i in range(3)] == [0, 0, 10]  # one overflow bucket
    assert len(limiter) == 4
    clock.now += 20.0  # every bucket refilled: the same as none, so pruned
    assert limiter.take("10.0.3.1") == 0
    assert len(limiter) == 1


def test_clients_are_counted_by_address_and_ipv6_by_its_64() -> None:
    assert client_key("10.0.0.1") == "10.0.0.1"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("2001:db8:1:2::5") != client_key("2001:db8:1:3::5")
    assert client_key(None) == OVERFLOW and client_key("") == OVERFLOW
    assert client_key("testclient") == "testclient"
