"""Waiting for cluster jobs: follow `mcp-media:events` for the keys waited on, and look the
results up once after watching starts and then every `FALLBACK_POLL` seconds, in case an event
was missed (events are fire-and-forget). A result answers a handle by `JobHandle.answered_by`;
what is handed back is localised (its output blob in this machine's cache)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pipelines.results import Envelope
from workers.core.gateway import JobHandle
from workers.state.events import FALLBACK_POLL, EventFollower
from workers.state.results import Results


@dataclass(frozen=True, slots=True)
class Waits:
    events: EventFollower
    results: Results
    localised: Callable[[Envelope], Envelope]


def wait_for(waits: Waits, handles: list[JobHandle], timeout: float) -> list[JobHandle]:
    """Each handle with the envelope that answers its job, or as it was at the deadline."""
    deadline = time.monotonic() + timeout
    found: dict[int, Envelope] = {}
    open_ = {i: h for i, h in enumerate(handles) if h.envelope is None}
    everything = threading.Event()
    lock = threading.Lock()

    def notifier(index: int, handle: JobHandle) -> Any:
        def notify(envelope: Envelope) -> None:
            if handle.answered_by(envelope):
                with lock:
                    found.setdefault(index, envelope)
                    if len(found) == len(open_):
                        everything.set()

        return notify

    cancels = [waits.events.watch(h.key, notifier(i, h)) for i, h in open_.items()]
    try:
        while open_:
            with lock:
                missing = [(i, h) for i, h in open_.items() if i not in found]
            if not missing:
                break
            stored = waits.results.get_many([h.key for _, h in missing])
            for index, handle in missing:
                envelope = stored.get(handle.key)
                if envelope is not None and handle.answered_by(envelope):
                    notifier(index, handle)(envelope)
            remaining = deadline - time.monotonic()
            if everything.is_set() or remaining <= 0:
                break
            everything.wait(min(remaining, FALLBACK_POLL))
    finally:
        for cancel in cancels:
            cancel()
    answered = {i: waits.localised(envelope) for i, envelope in found.items()}
    return [
        replace(h, envelope=answered[i], status=answered[i].status) if i in found else h
        for i, h in enumerate(handles)
    ]


async def wait_for_async(waits: Waits, handle: JobHandle, timeout: float) -> JobHandle:
    """`wait_for` one handle without holding a thread while it waits."""
    if handle.envelope is not None:
        return handle
    loop = asyncio.get_running_loop()
    arrived: asyncio.Future[Envelope] = loop.create_future()

    def deliver(envelope: Envelope) -> None:
        if not arrived.done():
            arrived.set_result(envelope)

    def notify(envelope: Envelope) -> None:
        if handle.answered_by(envelope):
            loop.call_soon_threadsafe(deliver, envelope)

    cancel = await loop.run_in_executor(None, waits.events.watch, handle.key, notify)
    deadline = time.monotonic() + timeout
    try:
        while True:
            stored = await loop.run_in_executor(None, waits.results.get, handle.key)
            if stored is not None and handle.answered_by(stored):
                stored = await loop.run_in_executor(None, waits.localised, stored)
                return replace(handle, envelope=stored, status=stored.status)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return handle
            try:
                envelope = await asyncio.wait_for(
                    asyncio.shield(arrived), min(remaining, FALLBACK_POLL)
                )
            except TimeoutError:
                continue
            local = await loop.run_in_executor(None, waits.localised, envelope)
            return replace(handle, envelope=local, status=local.status)
    finally:
        cancel()
