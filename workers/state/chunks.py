"""Streamed job output: a worker hands chunks (encoded speech, sentence by sentence) to
whoever waits for the job, through one stream per result key in the job's store (the
store port's `append_chunk`, `end_chunks`, `read_chunks`: the Redis store uses the
functions here, one Redis stream each; the in-memory twin keeps lists).

A job asks for it with the param `stream` naming the stream (`keys.chunks(key)`); the worker
appends `{"d": bytes}` entries as they come and ends with `{"end": ""}` (or the reason it
failed). The stream is bounded (entries capped, each under a few hundred kB: one sentence)
and expires by itself: `LIVE_TTL` after the last chunk, `DONE_TTL` after the end. Readers
start from the beginning, so every request waiting on one shared job gets the whole audio.
The finished file in the cache stays the result; the stream is only the early copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from workers.core import keys
from workers.core.gateway import Chunk

__all__ = ["Chunk", "append_chunk", "end_chunks", "read_chunks"]

LIVE_TTL = 300
DONE_TTL = 60
MAX_ENTRIES = 10_000  # more than the sentences of the longest text a job accepts


def check_name(name: str) -> str:
    if not name.startswith(keys.CHUNKS_PREFIX):
        raise ValueError(f"not a chunk stream: {name!r}")
    return name


def append_chunk(client: redis.Redis[bytes], name: str, data: bytes) -> None:
    """The worker's side: one more chunk (the stream lives `LIVE_TTL` past its last one)."""
    pipe = client.pipeline()
    pipe.xadd(check_name(name), {"d": data}, maxlen=MAX_ENTRIES, approximate=False)
    pipe.expire(name, LIVE_TTL)
    pipe.execute()


def end_chunks(client: redis.Redis[bytes], name: str, error: str = "") -> None:
    """The end mark, with the reason when the job failed (the stream lives `DONE_TTL` more)."""
    pipe = client.pipeline()
    pipe.xadd(check_name(name), {"end": error.encode()}, maxlen=MAX_ENTRIES, approximate=False)
    pipe.expire(name, DONE_TTL)
    pipe.execute()


def read_chunks(
    client: redis.Redis[bytes], name: str, after: str = "0", block_ms: int = 500
) -> Sequence[Chunk]:
    """The entries after `after`, waiting up to `block_ms` for the first one."""
    found = client.xread({name: after}, count=64, block=block_ms)
    chunks: list[Chunk] = []
    for _stream, entries in found or []:
        for entry_id, fields in entries:
            ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            if b"end" in fields:
                chunks.append(Chunk(ident, b"", end=True, error=fields[b"end"].decode()))
            else:
                chunks.append(Chunk(ident, fields.get(b"d", b"")))
    return chunks
