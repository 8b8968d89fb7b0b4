"""HTTP/1.1 requests written by hand on a raw socket, for what no client library sends: a
header block past any limit, a header line without a colon, a name that is not ASCII.

`exchange` writes the request from a thread (a server that answers early stops reading, and
a blocked write must not stop us reading its answer) and reads until the server closes. What
came back is the answer, or the socket error that ended the read (a reset loses the answer).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any

TIMEOUT = 30.0  # a bound so that a hang fails, never a timing claim


@dataclass(frozen=True)
class RawAnswer:
    status: int | None  # None: no status line came back
    headers: dict[str, str]
    body: bytes
    error: str | None  # the socket error that ended the read, if any

    def json(self) -> Any:
        return json.loads(self.body)


def head(
    target: bytes = b"/", lines: list[bytes] | None = None, method: bytes = b"GET", port: int = 0
) -> bytes:
    """A request head: `lines` are raw header lines, after Host and before the blank line."""
    host = b"127.0.0.1:%d" % port if port else b"127.0.0.1"
    start = method + b" " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n"
    return start + b"".join(line + b"\r\n" for line in lines or []) + b"\r\n"


def hostile_heads(path: bytes) -> dict[str, bytes]:
    """Request heads past a server's limits or outside HTTP's grammar, to `path`, by name."""
    return {
        "header_20kb": head(path, [b"X-Big: " + b"a" * 20_000]),
        "header_1mb": head(path, [b"X-Big: " + b"a" * 1024 * 1024]),
        "headers_200x100b": head(path, [b"X-H%03d: " % i + b"a" * 92 for i in range(200)]),
        "headers_10000": head(path, [b"X%d: a" % i for i in range(10_000)]),
        "headers_150_tiny": head(path, [b"X%d: a" % i for i in range(150)]),
        "url_100kb": head(path + b"?q=" + b"a" * 100_000),
        "no_colon": head(path, [b"NoColonHere"]),
        "non_ascii_name": head(path, ["X-Été: 1".encode()]),
        "non_ascii_url": head(path + "/é".encode()),
    }


def exchange(port: int, request: bytes, timeout: float = TIMEOUT) -> RawAnswer:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def write() -> None:
        with contextlib.suppress(OSError):  # the server stopped reading: its answer counts
            sock.sendall(request)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    received = bytearray()
    error = None
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        writer.join(timeout)
        sock.close()
    return parse(bytes(received), error)


def parse(raw: bytes, error: str | None) -> RawAnswer:
    head_bytes, _, body = raw.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return RawAnswer(None, {}, raw, error)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return RawAnswer(int(parts[1]), headers, body, error)
