"""Edit an ONNX file without the onnx package: drop one graph output or one metadata entry.
Used to make a whisper folder as exports before word timestamps wrote it (no `alignment`
output, no `alignment_heads` metadata) from one `models prepare` builds today.

An ONNX file is one protobuf ModelProto: its graph is field 7 (a GraphProto, whose outputs
are field 12, each a ValueInfoProto named by field 1), its metadata field 14 (entries with
their key in field 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipelines.onnx_metadata import encode_varint, varint_at

_GRAPH, _OUTPUT, _METADATA, _NAME = 7, 12, 14, 1
_LEN = 2


def _fields(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """(field number, the field's bytes as written, its payload when length-delimited)."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = varint_at(data, pos)
        wire, payload = key & 7, b""
        if wire == 0:
            _, pos = varint_at(data, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == _LEN:
            length, pos = varint_at(data, pos)
            payload = data[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield key >> 3, data[start:pos], payload


def _name(message: bytes) -> str:
    return next((p.decode() for f, _, p in _fields(message) if f == _NAME), "")


def _field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | _LEN) + encode_varint(len(payload)) + payload


def drop_output(src: Path, dst: Path, output: str) -> None:
    model = src.read_bytes()
    parts = []
    for number, raw, payload in _fields(model):
        if number == _GRAPH:
            kept = (r for f, r, p in _fields(payload) if not (f == _OUTPUT and _name(p) == output))
            raw = _field(_GRAPH, b"".join(kept))
        parts.append(raw)
    dst.write_bytes(b"".join(parts))


def drop_metadata(src: Path, dst: Path, key: str) -> None:
    model = src.read_bytes()
    dst.write_bytes(
        b"".join(r for f, r, p in _fields(model) if not (f == _METADATA and _name(p) == key))
    )
