"""PNG chunk checksums as libpng reads them: failing ancillary chunks are found by span,
critical ones and files that are not PNGs are left to the decoder."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from pipelines.png_chunks import SIGNATURE, broken_ancillary, decodable

pytestmark = pytest.mark.unit


def chunk(kind: bytes, body: bytes, crc: int | None = None) -> bytes:
    crc = zlib.crc32(kind + body) if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), (1, 2, 3)).save(out, "PNG")
    return out.getvalue()


def test_failing_ancillary_chunks_are_found_wherever_they_are() -> None:
    whole = png()
    first = chunk(b"tEXt", b"a\0b", crc=0)
    good = chunk(b"tEXt", b"c\0d")
    ihdr_end = len(SIGNATURE) + 25
    data = whole[:ihdr_end] + first + good + whole[ihdr_end:-12] + chunk(b"zTXt", b"x", 1)
    data += whole[-12:]
    spans = broken_ancillary(io.BytesIO(data))
    assert [data[a + 4 : a + 8] for a, _ in spans] == [b"tEXt", b"zTXt"]
    assert spans[0] == (ihdr_end, ihdr_end + len(first))


def test_critical_chunks_and_other_files_are_left_to_the_decoder() -> None:
    whole = bytearray(png())
    whole[len(SIGNATURE) + 8 + 13] ^= 0xFF  # IHDR's CRC
    assert broken_ancillary(io.BytesIO(bytes(whole))) == []
    assert broken_ancillary(io.BytesIO(b"GIF89a" + b"\0" * 40)) == []
    truncated = png()[:-20] + chunk(b"tEXt", b"long body")[:9]
    assert broken_ancillary(io.BytesIO(truncated)) == []


def test_decodable_drops_only_the_failing_chunks(tmp_path: Path) -> None:
    whole = png()
    ihdr_end = len(SIGNATURE) + 25
    data = whole[:ihdr_end] + chunk(b"tEXt", b"k\0v", crc=5) + whole[ihdr_end:]
    path = tmp_path / "x.png"
    path.write_bytes(data)
    source = decodable(path, "PNG")
    assert isinstance(source, io.BytesIO) and source.getvalue() == whole
    path.write_bytes(whole)
    assert decodable(path, "PNG") == path
    assert decodable(path, "JPEG") == path
    with Image.open(decodable(tmp_path / "x.png", "PNG")) as image:
        assert image.getpixel((0, 0)) == (1, 2, 3)
