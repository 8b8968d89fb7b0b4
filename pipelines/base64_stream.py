"""Base64 decoded in bounded chunks: standard or URL-safe, with line breaks and missing
padding, strict about everything else (`BlobError(BAD_BASE64)` says what is wrong and where),
and a bound of the decoded size computed without decoding (a blob is refused before any
byte is written)."""

from __future__ import annotations

from collections.abc import Iterator

import pybase64

from pipelines.media import BlobError, MarkerReason

# Base64 characters decoded per step: 1 MiB of text -> 768 KiB of bytes; bounded memory.
CHUNK_CHARS = 1024 * 1024
_WHITESPACE = " \t\r\n\f\v"
_URLSAFE_TO_STD = bytes.maketrans(b"-_", b"+/")


def decoded_size_bound(data: str, limit: int | None = None) -> int:
    """Upper bound of the decoded size, computed without decoding anything.

    When `limit` is given and the raw length alone proves the blob fits, the exact count of
    whitespace and padding (seven passes over the text) is skipped.
    """
    if limit is not None:
        # Up to two trailing '=' carry no data: a blob of exactly `limit` bytes stays fast.
        padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
        quick = ((len(data) - padding) * 3) // 4
        if quick <= limit:
            return quick
    significant = len(data) - sum(data.count(ch) for ch in _WHITESPACE + "=")
    return (significant * 3) // 4


def _decode_chunk(chunk: bytes | str) -> bytes:
    """Strict decode of whole quanta; an ASCII str is read in place, without encoding it."""
    return pybase64.b64decode(chunk, validate=True)


def iter_base64(data: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[bytes]:
    """Decode standard or URL-safe base64, with line breaks and missing padding, in chunks.

    Raises BlobError(BAD_BASE64) on illegal characters or bad padding.
    """
    carry = b""
    padding = 0  # '=' seen so far: from then on only more '=' may follow
    # Fast path: a chunk of plain standard base64 (no line breaks, URL-safe letters or
    # padding) decodes as it is; anything else, or any doubt, takes the general path below.
    fast = data.isascii() and chunk_chars % 4 == 0
    for start in range(0, len(data), chunk_chars):
        piece = data[start : start + chunk_chars]
        if fast and not carry and not padding and len(piece) % 4 == 0 and piece[-1:] != "=":
            try:
                yield _decode_chunk(piece)
                continue
            except ValueError:
                pass  # decoded again below, which says exactly what is wrong
        try:
            raw = piece.encode("ascii")
        except UnicodeEncodeError as exc:
            raise _bad_base64(f"non-ASCII character at offset {start + exc.start}") from None
        raw = raw.translate(_URLSAFE_TO_STD, b" \t\r\n\f\v")
        pad_at = raw.find(b"=")
        if padding or pad_at >= 0:
            tail = raw if padding else raw[pad_at:]
            if tail.strip(b"="):
                raise _bad_base64("data continues after the padding")
            padding += len(tail)
            raw = b"" if padding > len(tail) else raw[:pad_at]
        raw = carry + raw
        cut = len(raw) - len(raw) % 4
        carry = raw[cut:]
        if cut:
            yield _checked_decode(raw[:cut])
    rest = len(carry) % 4
    if rest == 1:
        raise _bad_base64("truncated: the length is not a valid base64 length")
    if padding and (rest == 0 or rest + padding > 4):
        raise _bad_base64("bad padding")
    if carry:
        yield _checked_decode(carry + b"=" * (4 - rest))


def _checked_decode(chunk: bytes) -> bytes:
    try:
        return _decode_chunk(chunk)
    except ValueError as exc:
        raise _bad_base64(f"illegal character: {exc}") from None


def _bad_base64(detail: str) -> BlobError:
    return BlobError(MarkerReason.BAD_BASE64, f"could not be decoded as base64 ({detail})")
