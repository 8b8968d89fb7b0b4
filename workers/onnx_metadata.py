"""Read and add ONNX model metadata (``ModelProto.metadata_props``) without the onnx package.

An ONNX file is one protobuf ``ModelProto``. Its top-level fields are walked without
decoding the graph, and new metadata entries are appended at the end of the file:
protobuf lets a repeated field appear anywhere in a message, so appending entries is a
valid edit that leaves every other byte (and the 60 MB of weights) untouched.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from pipelines.errors import ConfigError

_METADATA_FIELD = 14  # ModelProto.metadata_props: repeated StringStringEntryProto
_KEY_FIELD = 1
_VALUE_FIELD = 2
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _read_varint(stream: BinaryIO) -> int | None:
    """One base-128 varint, or None at a clean end of stream."""
    result = 0
    shift = 0
    while True:
        byte = stream.read(1)
        if not byte:
            if shift == 0:
                return None
            raise ConfigError("truncated varint")
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
        shift += 7
        if shift > 63:
            raise ConfigError("varint too long")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _fields(stream: BinaryIO, end: int) -> Iterator[tuple[int, int, bytes | None]]:
    """(field number, wire type, payload if length-delimited and wanted) up to ``end``.

    Only metadata payloads are read; every other length-delimited field is skipped by seeking.
    """
    while stream.tell() < end:
        tag = _read_varint(stream)
        if tag is None:
            return
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            _read_varint(stream)
            yield number, wire, None
        elif wire == _I64:
            stream.seek(8, 1)
            yield number, wire, None
        elif wire == _I32:
            stream.seek(4, 1)
            yield number, wire, None
        elif wire == _LEN:
            length = _read_varint(stream)
            if length is None or stream.tell() + length > end:
                raise ConfigError("length-delimited field runs past the end")
            if number == _METADATA_FIELD:
                yield number, wire, stream.read(length)
            else:
                stream.seek(length, 1)
                yield number, wire, None
        else:
            raise ConfigError(f"unsupported protobuf wire type {wire}")


def _entry(payload: bytes) -> tuple[str, str]:
    key = value = ""
    stream = io.BytesIO(payload)
    while True:
        tag = _read_varint(stream)
        if tag is None:
            return key, value
        if tag & 7 != _LEN:
            raise ConfigError("metadata entry holds a non-string field")
        length = _read_varint(stream) or 0
        text = stream.read(length).decode("utf-8")
        if tag >> 3 == _KEY_FIELD:
            key = text
        elif tag >> 3 == _VALUE_FIELD:
            value = text


def read_metadata(path: Path) -> dict[str, str]:
    """``metadata_props`` of an ONNX file as a dict; raises ConfigError if it is not ONNX."""
    size = path.stat().st_size
    found: dict[str, str] = {}
    try:
        with path.open("rb") as stream:
            for number, _wire, payload in _fields(stream, size):
                if number == _METADATA_FIELD and payload is not None:
                    key, value = _entry(payload)
                    found[key] = value
    except (ConfigError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable ONNX model ({exc})") from exc
    return found


def _encode_entry(key: str, value: str) -> bytes:
    body = bytearray()
    for number, text in ((_KEY_FIELD, key), (_VALUE_FIELD, value)):
        data = text.encode("utf-8")
        body += _varint(number << 3 | _LEN) + _varint(len(data)) + data
    return _varint(_METADATA_FIELD << 3 | _LEN) + _varint(len(body)) + bytes(body)


def write_with_metadata(src: Path, dst: Path, metadata: Mapping[str, str]) -> None:
    """Copy ``src`` to ``dst`` with ``metadata`` added; refuse to contradict existing keys."""
    existing = read_metadata(src)
    clashes = {k for k, v in metadata.items() if k in existing and existing[k] != v}
    if clashes:
        raise ConfigError(f"{src}: metadata already sets {sorted(clashes)} differently")
    shutil.copyfile(src, dst)
    with dst.open("ab") as out:
        for key, value in metadata.items():
            if key not in existing:
                out.write(_encode_entry(key, value))
