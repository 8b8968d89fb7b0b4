"""ONNX model metadata (`ModelProto.metadata_props`), read and added without the onnx package.

An ONNX file is one protobuf `ModelProto`. Its top-level fields are walked and every field
but metadata is skipped with a seek, so a 60 MB model costs a few small reads (the `onnx`
package would be a new dependency; onnxruntime would build a whole session). New entries
are appended at the end of a copy: protobuf lets a repeated field appear anywhere in a
message, so that is a valid edit that leaves every other byte untouched.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from pipelines.errors import ConfigError

_KEY_FIELD = 1
_VALUE_FIELD = 2
_METADATA_PROPS = 14  # ModelProto.metadata_props (repeated StringStringEntryProto)
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def read_onnx_metadata(path: Path) -> dict[str, str]:
    """`metadata_props` of an ONNX file; ConfigError if it cannot be read or is not ONNX."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            return _walk_model(fh, size, path)
    except OSError as exc:
        raise ConfigError(f"cannot read ONNX model {path}: {exc.strerror}") from exc


def _walk_model(fh: BinaryIO, size: int, path: Path) -> dict[str, str]:
    meta: dict[str, str] = {}
    while fh.tell() < size:
        key = _varint(fh, path)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            _varint(fh, path)
        elif wire in (_I64, _I32):
            fh.seek(8 if wire == _I64 else 4, 1)
        elif wire == _LEN:
            length = _varint(fh, path)
            if fh.tell() + length > size:
                raise ConfigError(f"{path} is truncated or not an ONNX model")
            if field == _METADATA_PROPS:
                entry = _entry(fh.read(length), path)
                meta[entry[0]] = entry[1]
            else:
                fh.seek(length, 1)
        else:
            raise ConfigError(f"{path} is not an ONNX model (wire type {wire})")
    if fh.tell() != size:
        raise ConfigError(f"{path} is truncated or not an ONNX model")
    return meta


def _varint(fh: BinaryIO, path: Path) -> int:
    value = 0
    for shift in range(0, 70, 7):
        byte = fh.read(1)
        if not byte:
            raise ConfigError(f"{path} is truncated or not an ONNX model")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
    raise ConfigError(f"{path} is not an ONNX model (bad varint)")


def _entry(data: bytes, path: Path) -> tuple[str, str]:
    """Decode one StringStringEntryProto (key = field 1, value = field 2)."""
    fields = {1: "", 2: ""}
    pos = 0
    while pos < len(data):
        key, pos = varint_at(data, pos)
        length, pos = varint_at(data, pos)
        if key & 7 != _LEN or pos + length > len(data):
            raise ConfigError(f"{path} has malformed metadata")
        fields[key >> 3] = data[pos : pos + length].decode("utf-8", "replace")
        pos += length
    return fields[1], fields[2]


def varint_at(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ConfigError("malformed ONNX metadata entry")


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _encode_entry(key: str, value: str) -> bytes:
    body = bytearray()
    for number, text in ((_KEY_FIELD, key), (_VALUE_FIELD, value)):
        data = text.encode("utf-8")
        body += encode_varint(number << 3 | _LEN) + encode_varint(len(data)) + data
    return encode_varint(_METADATA_PROPS << 3 | _LEN) + encode_varint(len(body)) + bytes(body)


def write_with_metadata(src: Path, dst: Path, metadata: Mapping[str, str]) -> None:
    """Copy ``src`` to ``dst`` with ``metadata`` added; refuse to contradict existing keys."""
    existing = read_onnx_metadata(src)
    clashes = {k for k, v in metadata.items() if k in existing and existing[k] != v}
    if clashes:
        raise ConfigError(f"{src}: metadata already sets {sorted(clashes)} differently")
    shutil.copyfile(src, dst)
    with dst.open("ab") as out:
        for key, value in metadata.items():
            if key not in existing:
                out.write(_encode_entry(key, value))
