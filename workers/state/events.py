"""Following `mcp-media:events`: one subscription per process hands each stored result to
whoever waits for its job.

Events are fire-and-forget (a waiter that subscribes late, or a subscription that drops, misses
them), so every wait also looks results up once after it starts watching and again every
`FALLBACK_POLL` seconds; the events only make the common case immediate.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import redis

from pipelines.results import Envelope, ResultKey
from workers.core import keys

log = logging.getLogger(__name__)

FALLBACK_POLL = 1.0  # seconds between look-ups while the events stay silent
RESUBSCRIBE_DELAY = 0.5

Notify = Callable[[Envelope], None]


class EventFollower:
    """A daemon thread on one pub/sub connection, dispatching envelopes by result key."""

    def __init__(self, client: redis.Redis[bytes]) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._watchers: dict[ResultKey | None, list[Notify]] = {}  # None: every key
        self._thread: threading.Thread | None = None
        self._subscribed = threading.Event()
        self._stop = threading.Event()

    def watch(self, key: ResultKey | None, notify: Notify) -> Callable[[], None]:
        """Call `notify` with each envelope stored for `key` (None: for any key) from now on;
        returns the cancel.

        Blocks (briefly) until the subscription is live, so that a look-up made after this
        call and the events cover every moment between them.
        """
        with self._lock:
            self._watchers.setdefault(key, []).append(notify)
            self._start()
        self._subscribed.wait(timeout=FALLBACK_POLL)

        def cancel() -> None:
            with self._lock:
                found = self._watchers.get(key, [])
                if notify in found:
                    found.remove(notify)
                if not found:
                    self._watchers.pop(key, None)

        return cancel

    def watch_all(self, notify: Notify) -> Callable[[], None]:
        """Call `notify` with every envelope stored from now on; returns the cancel."""
        return self.watch(None, notify)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="events", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * FALLBACK_POLL)

    def _run(self) -> None:
        lost = False  # said once per outage: a client that fails fast would repeat it
        while not self._stop.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(keys.EVENTS)
                self._subscribed.set()
                if lost:
                    log.warning("events subscription back")
                    lost = False
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=FALLBACK_POLL)
                    if message is not None:
                        self._dispatch(message)
            except Exception as exc:  # the broker is restarting: the waits poll meanwhile
                if not lost:
                    log.warning("events subscription lost (%s); subscribing again", exc)
                    lost = True
                self._subscribed.clear()
                self._stop.wait(RESUBSCRIBE_DELAY)
            finally:
                with contextlib.suppress(Exception):  # closing a broken connection
                    pubsub.close()

    def _dispatch(self, message: dict[str, Any]) -> None:
        try:
            envelope = Envelope.from_json(json.loads(message["data"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed event: %.200r", message.get("data"))
            return
        with self._lock:
            found = [*self._watchers.get(envelope.key, ()), *self._watchers.get(None, ())]
        for notify in found:
            notify(envelope)
