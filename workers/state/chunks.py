"""Chunk streams, a job's output handed over as it comes: the port, its Redis adapter (one
Redis stream per result key) and its in-memory twin.

A worker hands chunks (encoded speech, sentence by sentence) to whoever waits for the job.
A job asks for it with the param `stream` naming the stream (`keys.chunks(key)`); the worker
appends `{"d": bytes}` entries as they come and ends with `{"end": ""}` (or the reason it
failed). The stream is bounded (entries capped, each under a few hundred kB: one sentence)
and expires by itself: `LIVE_TTL` after the last chunk, `DONE_TTL` after the end. Readers
start from the beginning, so every request waiting on one shared job gets the whole audio.
The finished file in the cache stays the result; the stream is only the early copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Protocol

import redis

from workers.core import keys
from workers.core.gateway import Chunk

__all__ = ["Chunk", "ChunkStreams", "MemoryChunks", "RedisChunks"]

LIVE_TTL = 300
DONE_TTL = 60
MAX_ENTRIES = 10_000  # more than the sentences of the longest text a job accepts
READ_COUNT = 64  # entries handed over by one read


def check_name(name: str) -> str:
    if not name.startswith(keys.CHUNKS_PREFIX):
        raise ValueError(f"not a chunk stream: {name!r}")
    return name


class ChunkStreams(Protocol):
    def append(self, name: str, data: bytes) -> None:
        """The worker's side: one more chunk (the stream lives `LIVE_TTL` past its last one)."""
        ...

    def end(self, name: str, error: str = "") -> None:
        """The end mark, with the reason when the job failed (the stream lives `DONE_TTL`
        more)."""
        ...

    def read(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]:
        """The entries after `after`, waiting up to `block_ms` for the first one."""
        ...


class RedisChunks:
    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.redis = client

    def append(self, name: str, data: bytes) -> None:
        pipe = self.redis.pipeline()
        pipe.xadd(check_name(name), {"d": data}, maxlen=MAX_ENTRIES, approximate=False)
        pipe.expire(name, LIVE_TTL)
        pipe.execute()

    def end(self, name: str, error: str = "") -> None:
        pipe = self.redis.pipeline()
        pipe.xadd(check_name(name), {"end": error.encode()}, maxlen=MAX_ENTRIES, approximate=False)
        pipe.expire(name, DONE_TTL)
        pipe.execute()

    def read(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]:
        found = self.redis.xread({check_name(name): after}, count=READ_COUNT, block=block_ms)
        chunks: list[Chunk] = []
        for _stream, entries in found or []:
            for entry_id, fields in entries:
                ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                if b"end" in fields:
                    chunks.append(Chunk(ident, b"", end=True, error=fields[b"end"].decode()))
                else:
                    chunks.append(Chunk(ident, fields.get(b"d", b"")))
        return chunks


class MemoryChunks:
    """The twin, for one process: bounded lists, a reader woken by the next chunk. Streams
    are kept until the process ends (its jobs are few)."""

    def __init__(self) -> None:
        self._appended = threading.Condition()
        self._streams: dict[str, list[Chunk]] = {}

    def append(self, name: str, data: bytes) -> None:
        self._add(name, Chunk("", data))

    def end(self, name: str, error: str = "") -> None:
        self._add(name, Chunk("", b"", end=True, error=error))

    def _add(self, name: str, chunk: Chunk) -> None:
        with self._appended:
            stream = self._streams.setdefault(check_name(name), [])
            last = int(stream[-1].id) if stream else 0
            stream.append(Chunk(str(last + 1), chunk.data, chunk.end, chunk.error))
            del stream[:-MAX_ENTRIES]
            self._appended.notify_all()

    def read(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]:
        check_name(name)
        seen = int(after.split("-")[0] or 0)
        deadline = time.monotonic() + block_ms / 1000
        with self._appended:
            while True:
                found = [c for c in self._streams.get(name, ()) if int(c.id) > seen]
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found[:READ_COUNT]
                self._appended.wait(left)
