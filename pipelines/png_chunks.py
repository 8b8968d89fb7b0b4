"""PNG chunks whose checksum fails, read as libpng reads them.

libpng (and so browsers and image viewers) ends on a critical chunk (IHDR, PLTE, IDAT, IEND)
that fails its CRC, but drops an ancillary one (iCCP, tEXt, ...: the first letter lower case)
with a warning. Pillow refuses the whole file for either, so an image every viewer shows was
"not an image" here (the MCP reference server's own `get-tiny-image` has an iCCP chunk with
a bad checksum). `decodable` gives the bytes Pillow should decode: the file as it is, or
without its failing ancillary chunks. The cache keeps the original bytes.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ANCILLARY = 0x20  # bit 5 of a chunk type's first byte


def broken_ancillary(file: BinaryIO) -> list[tuple[int, int]]:
    """The (start, end) byte spans of ancillary chunks whose CRC fails, in order; none when
    the file is not a PNG, or its chunks cannot be walked (Pillow then says why). Only
    ancillary chunks are read; IDAT and the other critical ones are skipped over."""
    if file.read(len(SIGNATURE)) != SIGNATURE:
        return []
    spans = []
    at = len(SIGNATURE)
    while True:
        head = file.read(8)
        if len(head) < 8:
            break
        length, kind = struct.unpack(">I4s", head)
        end = at + 12 + length
        if kind[0] & _ANCILLARY:
            body = file.read(length + 4)
            if len(body) < length + 4:
                break
            if zlib.crc32(body[:-4], zlib.crc32(kind)) != struct.unpack(">I", body[-4:])[0]:
                spans.append((at, end))
        elif kind == b"IEND":
            break
        else:
            file.seek(end)
        at = end
    return spans


def decodable(path: Path, pillow_format: str) -> Path | BinaryIO:
    """What to hand Pillow for `path`: the path itself, or, for a PNG with failing
    ancillary chunks, its bytes without them."""
    if pillow_format != "PNG":
        return path
    with path.open("rb") as file:
        spans = broken_ancillary(file)
    if not spans:
        return path
    data = path.read_bytes()
    kept = bytearray()
    at = 0
    for start, end in spans:
        kept += data[at:start]
        at = end
    kept += data[at:]
    return io.BytesIO(bytes(kept))
