"""Formats a validator has proved, by sha256, so the same bytes arriving again skip the work.

A content-addressed blob is its bytes: once a validator accepted them (e.g. ingest's image
check, a bounded full decode), the same sha256 would be accepted again as the same format.
`MediaCache` consults a `ProvenFormats` the caller owns (one per validator) and, when the
blob is proved and its file is already in the cache, returns it without writing, syncing or
decoding anything (a screenshot a tool returns on every call costs its hash, nothing more).
Only successes are remembered; a refusal is checked again every time.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from pipelines.sniff import Format

PROVEN_ENTRIES = 4096
# Decoded bytes held in memory to hash a blob before writing it; larger ones stream as before.
BUFFER_BYTES = 8 * 1024 * 1024


class ProvenFormats:
    """sha256 -> the format one validator proved; the most recent PROVEN_ENTRIES, thread-safe."""

    def __init__(self, entries: int = PROVEN_ENTRIES) -> None:
        self._entries = entries
        self._found: OrderedDict[str, Format] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sha256: str) -> Format | None:
        with self._lock:
            found = self._found.get(sha256)
            if found is not None:
                self._found.move_to_end(sha256)
            return found

    def add(self, sha256: str, fmt: Format) -> None:
        with self._lock:
            self._found[sha256] = fmt
            self._found.move_to_end(sha256)
            while len(self._found) > self._entries:
                self._found.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Held:
    """A whole blob read into memory: its chunks, sha256 and size."""

    chunks: tuple[bytes, ...]
    sha256: str
    size: int


def hold(chunks: Iterator[bytes], budget: int) -> tuple[Iterator[bytes], Held | None]:
    """Read `chunks` into memory while they stay within `budget` bytes: the chunks to write
    (the same bytes, in order) and the blob as held, or None when it is larger (then the
    chunks read so far come first and the rest streams)."""
    held: list[bytes] = []
    size = 0
    for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size > budget:
            return itertools.chain(held, chunks), None
    hasher = hashlib.sha256()
    for chunk in held:
        hasher.update(chunk)
    return iter(held), Held(tuple(held), hasher.hexdigest(), size)
