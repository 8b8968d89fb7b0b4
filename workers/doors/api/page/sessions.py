"""The page's sessions: one random id per login, held in this process, bounded and expiring.

Server-side rather than signed: `serve` is one process, so a table here is the simplest thing
that makes logout final (the id is forgotten, the old cookie names nothing) without a
revocation list. The table holds at most `cap` sessions (the oldest login is logged out past
it) and each lives `SESSION_SECONDS` from its login; expired ones are pruned on every login.
A restart of `serve` (or a new key, which needs one) logs every browser out. Several `serve`
processes behind one balancer would not share sessions: a browser sent to the other one is
asked to log in again (fails closed).

Only a digest of each id is kept, so the table never holds a usable cookie. Each session has
its own random CSRF token.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

SESSION_SECONDS = 7 * 24 * 3600
DEFAULT_CAP = 1000


@dataclass(frozen=True, slots=True)
class PageSession:
    cookie: str  # the random id the browser holds
    csrf: str
    expires: float  # on the table's clock


def _digest(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "replace")).digest()


class SessionTable:
    """Logged-in browsers by the digest of their cookie, oldest login first."""

    def __init__(
        self,
        cap: int = DEFAULT_CAP,
        lifetime: float = SESSION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cap < 1:
            raise ValueError("a session table holds at least one session")
        self.cap = cap
        self.lifetime = lifetime
        self._clock = clock
        self._lock = threading.Lock()
        # Every session lives the same `lifetime` from its login: insertion order is expiry order.
        self._sessions: OrderedDict[bytes, PageSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self) -> PageSession:
        """A new login: a fresh id and token; the expired and, past the cap, the oldest go."""
        now = self._clock()
        session = PageSession(
            cookie=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            expires=now + self.lifetime,
        )
        with self._lock:
            self._prune(now)
            while len(self._sessions) >= self.cap:
                self._sessions.popitem(last=False)
            self._sessions[_digest(session.cookie)] = session
        return session

    def get(self, cookie: str) -> PageSession | None:
        """The live session this cookie names, if any."""
        if not cookie:
            return None
        with self._lock:
            session = self._sessions.get(_digest(cookie))
            if session is None or session.expires <= self._clock():
                return None
        return session

    def close(self, cookie: str) -> None:
        """Logout: the cookie names nothing from now on."""
        with self._lock:
            self._sessions.pop(_digest(cookie), None)

    def _prune(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if oldest.expires > now:
                return
            self._sessions.popitem(last=False)
