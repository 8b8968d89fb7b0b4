"""The stdio door's pipes read and written on the event loop: the same lines and bytes as the
SDK's threaded text wrapper, whatever the reads and writes are cut into."""

from __future__ import annotations

import io
import os
import threading

import anyio
import pytest

from workers.doors.mcp.stdio_pipes import PipeLines, PipeWriter, is_pipe

pytestmark = pytest.mark.unit

TIMEOUT = 30  # a hang fails the test, never a speed


async def _lines(pieces: list[bytes]) -> list[str]:
    read, write = os.pipe()

    def feed() -> None:
        with os.fdopen(write, "wb", buffering=0) as out:
            for piece in pieces:
                out.write(piece)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        with anyio.fail_after(TIMEOUT):
            return [line async for line in PipeLines(read)]
    finally:
        feeder.join()
        os.close(read)


def _wrapper_lines(data: bytes) -> list[str]:
    """What the SDK's stdin wrapper reads from the same bytes."""
    return list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace"))


@pytest.mark.parametrize(
    "pieces",
    [
        [b'{"a":1}\n{"b":2}\n'],
        [b'{"a":', b"1}\n", b'{"b":2}'],  # a line cut across reads; the last without newline
        [b'{"a":1}\r\n{"b":2}\r', b'\n{"c":3}\r{"d":4}\n'],  # CRLF (cut after CR) and CR
        ['{"t":"caf\u00e9 \u20ac"}\n'.encode()[:9], '{"t":"caf\u00e9 \u20ac"}\n'.encode()[9:]],
        [b'{"t":"\xff\xfe"}\n'],  # not UTF-8: replaced, as the wrapper does
        [b"\n\n", b"x" * 200_000 + b"\n"],  # empty lines, and a line longer than one read
    ],
)
def test_lines_are_the_lines_the_sdk_wrapper_reads(pieces: list[bytes]) -> None:
    assert anyio.run(_lines, pieces) == _wrapper_lines(b"".join(pieces))


def test_a_message_larger_than_the_pipe_arrives_whole() -> None:
    message = "".join(f'{{"n":{i},"pad":"{"x" * 90}"}}\n' for i in range(20_000))  # ~2 MB
    read, write = os.pipe()
    os.set_blocking(write, False)  # as claimed_stdout leaves it: writes wait for room
    received = bytearray()

    def drain() -> None:
        with os.fdopen(read, "rb", buffering=0) as source:
            while chunk := source.read(65536):
                received.extend(chunk)

    async def main() -> None:
        with anyio.fail_after(TIMEOUT):
            writer = PipeWriter(write)
            await writer.write(message)
            await writer.flush()

    drainer = threading.Thread(target=drain)
    drainer.start()
    try:
        anyio.run(main)
    finally:
        os.close(write)
        drainer.join()
    assert bytes(received) == message.encode()


def test_only_pipes_and_sockets_are_read_on_the_loop() -> None:
    read, write = os.pipe()
    try:
        assert is_pipe(read) and is_pipe(write)
    finally:
        os.close(read)
        os.close(write)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        assert not is_pipe(null)  # /dev/null cannot be waited on: the SDK's threads read it
    finally:
        os.close(null)
