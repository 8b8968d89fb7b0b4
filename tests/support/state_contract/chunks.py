"""The chunk streams port: a job's output handed over in order, a waiting reader woken."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.state_contract.common import KEY, OTHER, Check, Harness
from workers.core import keys
from workers.state.chunks import Chunk


def check_chunk_streams_hand_output_over_in_order(h: Harness, tmp: Path) -> None:
    chunks = h.make(tmp).chunks
    name = keys.chunks(KEY)
    assert chunks.read(name, "0", block_ms=10) == []  # nothing yet: an empty answer
    chunks.append(name, b"first")
    chunks.append(name, b"second")
    found = chunks.read(name, "0", block_ms=10)
    assert [c.data for c in found] == [b"first", b"second"] and not any(c.end for c in found)
    chunks.end(name, "ValueError: boom")
    (end,) = chunks.read(name, found[-1].id, block_ms=10)  # only what came after
    assert end.end and end.error == "ValueError: boom"
    # a reader waiting on the stream is woken by the next chunk
    other = keys.chunks(OTHER)
    got: list[Chunk] = []
    reader = threading.Thread(target=lambda: got.extend(chunks.read(other, "0", 10_000)))
    reader.start()
    chunks.append(other, b"late")
    reader.join(timeout=15)
    assert [c.data for c in got] == [b"late"]
    with pytest.raises(ValueError, match="not a chunk stream"):
        chunks.append("mcp-media:result:x", b"no")
    with pytest.raises(ValueError, match="not a chunk stream"):
        chunks.read("mcp-media:result:x", "0", block_ms=10)


CHECKS: list[Check] = [check_chunk_streams_hand_output_over_in_order]
