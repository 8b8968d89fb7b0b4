"""Live updates: one thread per serve process listens to `mcp-media:events` and renders the
page's live parts; every open page gets the parts that changed over server-sent events.

The cost does not grow with the number of open pages: the cluster is read at most every
MIN_GAP seconds after an event (a result stored) and every REFRESH seconds otherwise (queue
lengths and the workers' announcements change without an event). Nothing runs while no
page is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable

from workers.doors.api.page import views
from workers.doors.api.page.board import Board

log = logging.getLogger("mcp_media.page")

MIN_GAP = 0.3
REFRESH = 2.0
KEEPALIVE = 15.0
# A stream ends after this long and the browser reconnects by itself (`retry`): a server
# that stops is never held open by a page.
STREAM_SECONDS = 60.0

Parts = dict[str, str]


class Hub:
    """Renders the live parts once for every open page. Each session has its own CSRF token,
    so the parts carry a random stand-in (content cannot guess it) that each page's stream
    replaces with its session's token."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.stand_in = secrets.token_hex(16)
        self.latest: Parts | None = None
        self._subscribers: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Parts]]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue[Parts]]:
        entry = (asyncio.get_running_loop(), asyncio.Queue[Parts](maxsize=1))
        with self._lock:
            self._subscribers.add(entry)
            if self.latest is not None:
                entry[1].put_nowait(self.latest)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="page-events", daemon=True)
                self._thread.start()
        self._wake.set()
        return entry

    def poke(self) -> None:
        """Read the cluster now (an action changed something no event announces)."""
        self._wake.set()

    def unsubscribe(self, entry: tuple[asyncio.AbstractEventLoop, asyncio.Queue[Parts]]) -> None:
        with self._lock:
            self._subscribers.discard(entry)

    def _publish(self, parts: Parts) -> None:
        with self._lock:
            self.latest = parts
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            with contextlib.suppress(RuntimeError):  # that page's loop is closing
                loop.call_soon_threadsafe(_put_latest, queue, parts)

    def _run(self) -> None:
        cancel: Callable[[], None] | None = None
        dirty, last, next_full = True, 0.0, 0.0
        while True:
            with self._lock:
                watched = bool(self._subscribers)
            if not watched:
                if cancel is not None:
                    cancel()
                    cancel = None
                self._wake.wait(REFRESH)
                self._wake.clear()
                dirty = True
                continue
            try:
                if cancel is None:  # every stored result wakes the page up
                    cancel = self.board.ops.watch_all(lambda _: self._wake.set())
                if self._wake.wait(MIN_GAP):  # a burst of results: one render for all
                    self._wake.clear()
                    dirty = True
                now = time.monotonic()
                if (dirty and now - last >= MIN_GAP) or now >= next_full:
                    parts = views.fragments(self.board.snapshot(), self.stand_in)
                    dirty, last, next_full = False, now, now + REFRESH
                    if parts != self.latest:
                        self._publish(parts)
            except Exception:  # the broker may be restarting: try again shortly
                log.warning("jobs page: cannot read the cluster", exc_info=True)
                time.sleep(1.0)


def _put_latest(queue: asyncio.Queue[Parts], parts: Parts) -> None:
    """Only the newest state matters: a slow page skips the states it missed."""
    with contextlib.suppress(asyncio.QueueEmpty):
        queue.get_nowait()
    queue.put_nowait(parts)


async def stream(hub: Hub, csrf: str) -> AsyncIterator[str]:
    entry = hub.subscribe()
    loop, queue = entry
    sent: Parts = {}
    ends = loop.time() + STREAM_SECONDS
    try:
        yield "retry: 1000\n\n"
        while loop.time() < ends:
            try:
                parts = await asyncio.wait_for(
                    queue.get(), timeout=min(KEEPALIVE, ends - loop.time())
                )
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            mine = {k: v.replace(hub.stand_in, csrf) for k, v in parts.items()}
            changed = {k: v for k, v in mine.items() if sent.get(k) != v}
            if changed:
                sent.update(changed)
                yield f"event: parts\ndata: {json.dumps(changed)}\n\n"
    finally:
        hub.unsubscribe(entry)
