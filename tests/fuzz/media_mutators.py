"""Structure-aware mutations of media bytes: PNG chunks, JPEG segments, TIFF IFDs, WAV headers.

Byte flips rarely get past a PNG CRC or a JPEG segment length; these mutators edit the
structure the header checks read (sizes, depths, counts, tiles) and keep the container
well-formed (CRCs recomputed, lengths kept), so the decoders are reached with hostile
but plausible headers. `mutate_media(raw, rng)` picks by magic bytes; unknown bytes are
returned unchanged.
"""

from __future__ import annotations

import random
import struct
import zlib

INTERESTING = [0, 1, 2, 3, 7, 8, 15, 16, 17, 255, 256, 4096, 8000, 46336, 65535, 65536]
INTERESTING_32 = [*INTERESTING, 2**31 - 1, 2**32 - 1]


def mutate_media(raw: bytes, rng: random.Random) -> bytes:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return mutate_png(raw, rng)
    if raw.startswith(b"\xff\xd8"):
        return mutate_jpeg(raw, rng)
    if raw[:4] in (b"II*\x00", b"MM\x00*"):
        return mutate_tiff(raw, rng)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE":
        return mutate_wav(raw, rng)
    return raw


# PNG: a list of (type, data) chunks, written back with correct lengths and CRCs.


def _png_chunks(raw: bytes) -> list[tuple[bytes, bytes]]:
    chunks = []
    pos = 8
    while pos + 12 <= len(raw):
        (length,) = struct.unpack_from(">I", raw, pos)
        kind = raw[pos + 4 : pos + 8]
        chunks.append((kind, raw[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def _png_bytes(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = [b"\x89PNG\r\n\x1a\n"]
    for kind, data in chunks:
        crc = zlib.crc32(kind + data)
        out.append(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc))
    return b"".join(out)


def mutate_png(raw: bytes, rng: random.Random) -> bytes:
    chunks = _png_chunks(raw)
    if not chunks:
        return raw
    op = rng.randrange(6)
    if op == 0 and chunks[0][0] == b"IHDR" and len(chunks[0][1]) == 13:
        fields = list(struct.unpack(">IIBBBBB", chunks[0][1]))
        slot = rng.randrange(7)
        pool = INTERESTING_32 if slot < 2 else INTERESTING
        fields[slot] = rng.choice(pool) & (0xFFFFFFFF if slot < 2 else 0xFF)
        chunks[0] = (b"IHDR", struct.pack(">IIBBBBB", *fields))
    elif op == 1:  # many empty ancillary chunks
        at = rng.randrange(1, len(chunks) + 1)
        chunks[at:at] = [(rng.choice([b"prVt", b"tEXt", b"zTXt", b"iTXt"]), b"")] * rng.choice(
            [10, 1000, 5000]
        )
    elif op == 2:  # duplicate one chunk (a second IHDR, a split IDAT, a PLTE)
        i = rng.randrange(len(chunks))
        chunks[i:i] = [chunks[i]] * rng.randint(1, 50)
    elif op == 3 and len(chunks) > 1:
        del chunks[rng.randrange(len(chunks))]
    elif op == 4:  # an acTL claiming many frames, or a huge iCCP/zTXt
        kind = rng.choice([b"acTL", b"iCCP", b"zTXt", b"sPLT", b"tRNS"])
        body = struct.pack(">II", rng.choice(INTERESTING_32), 0)
        if kind != b"acTL":
            body = b"x\x00\x00" + zlib.compress(b"\x00" * rng.choice([10, 10**5, 10**6]))
        chunks.insert(1, (kind, body))
    else:  # an IDAT that inflates to much more than the canvas
        chunks.insert(len(chunks) - 1, (b"IDAT", zlib.compress(b"\x00" * rng.choice([1, 10**6]))))
    return _png_bytes(chunks)


# JPEG: marker segments (entropy-coded data kept with the SOS before it).


def _jpeg_segments(raw: bytes) -> list[bytes]:
    segments = []
    pos = 2
    while pos + 4 <= len(raw) and raw[pos] == 0xFF:
        marker = raw[pos + 1]
        if marker == 0xD9:
            break
        (length,) = struct.unpack_from(">H", raw, pos + 2)
        end = pos + 2 + length
        if marker == 0xDA:  # the scan runs to the next marker that is not data
            nxt = end
            while True:
                nxt = raw.find(b"\xff", nxt)
                if nxt < 0 or nxt + 1 >= len(raw):
                    nxt = len(raw)
                    break
                if raw[nxt + 1] not in (0x00, *range(0xD0, 0xD8)):
                    break
                nxt += 2
            end = nxt
        segments.append(raw[pos:end])
        pos = end
    return segments


def mutate_jpeg(raw: bytes, rng: random.Random) -> bytes:
    segments = _jpeg_segments(raw)
    if not segments:
        return raw
    op = rng.randrange(5)
    sofs = [i for i, s in enumerate(segments) if s[1] in range(0xC0, 0xD0) and s[1] != 0xC4]
    scans = [i for i, s in enumerate(segments) if s[1] == 0xDA]
    if op == 0 and sofs:  # frame size, precision, component count
        i = sofs[0]
        sof = bytearray(segments[i])
        slot = rng.randrange(4)
        if slot == 0:
            sof[4] = rng.choice([8, 12, 16, 0, 255])
        elif slot in (1, 2):
            struct.pack_into(">H", sof, 3 + 2 * slot, rng.choice(INTERESTING) & 0xFFFF)
        else:
            sof[9] = rng.choice([0, 1, 2, 3, 4, 255])
        segments[i] = bytes(sof)
    elif op == 1 and sofs:  # baseline <-> progressive
        sof = bytearray(segments[sofs[0]])
        sof[1] = rng.choice([0xC0, 0xC1, 0xC2, 0xC3, 0xC9, 0xCA])
        segments[sofs[0]] = bytes(sof)
    elif op == 2 and scans:  # many copies of a scan
        i = rng.choice(scans)
        segments[i + 1 : i + 1] = [segments[i]] * rng.choice([2, 30, 70, 500])
    elif op == 3 and len(segments) > 1:
        del segments[rng.randrange(len(segments))]
    else:  # a segment whose length runs past the file
        i = rng.randrange(len(segments))
        seg = bytearray(segments[i])
        if len(seg) >= 4:
            struct.pack_into(">H", seg, 2, rng.choice([0, 1, 2, 0xFFFF]))
        segments[i] = bytes(seg)
    return b"\xff\xd8" + b"".join(segments) + b"\xff\xd9"


# TIFF: the entries of the first IFD, edited in place.

_TIFF_TAGS = [256, 257, 258, 259, 262, 273, 277, 278, 279, 322, 323, 324, 325, 338, 339]


def mutate_tiff(raw: bytes, rng: random.Random) -> bytes:
    order = "<" if raw[:2] == b"II" else ">"
    data = bytearray(raw)
    try:
        (offset,) = struct.unpack_from(order + "I", data, 4)
        (count,) = struct.unpack_from(order + "H", data, offset)
    except struct.error:
        return raw
    op = rng.randrange(4)
    if op == 0 and offset + 2 <= len(data):  # an entry count the IFD does not hold
        struct.pack_into(order + "H", data, offset, rng.choice([0, 1, 600, 65535]))
        return bytes(data)
    if op == 1:  # the IFD offset anywhere
        struct.pack_into(order + "I", data, 4, rng.choice(INTERESTING_32))
        return bytes(data)
    entries = [offset + 2 + 12 * i for i in range(count) if offset + 14 + 12 * i <= len(data)]
    if not entries:
        return raw
    at = rng.choice(entries)
    if op == 2:  # retag an entry: a tile size or a depth where there was none
        struct.pack_into(order + "H", data, at, rng.choice(_TIFF_TAGS))
    # set its value to an interesting LONG
    struct.pack_into(order + "HI", data, at + 2, 4, 1)
    struct.pack_into(order + "I", data, at + 8, rng.choice(INTERESTING_32))
    return bytes(data)


# WAV: the fmt fields and the data size.


def mutate_wav(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    fmt = data.find(b"fmt ", 12, 4096)
    if fmt < 0 or fmt + 24 > len(data):
        return raw
    body = fmt + 8
    field_ = rng.randrange(6)
    layout = [("H", 0), ("H", 2), ("I", 4), ("I", 8), ("H", 12), ("H", 14)]
    kind, off = layout[field_]
    if field_ == 5 or rng.random() < 0.3:
        kind, off = "I", -4  # the data size (or the fmt chunk length)
        where = data.find(b"data", body) + 4 if field_ == 5 else fmt + 4
        if where < 4:
            return raw
        struct.pack_into("<I", data, where, rng.choice(INTERESTING_32))
        return bytes(data)
    pool = INTERESTING_32 if kind == "I" else INTERESTING
    value = rng.choice([*pool, 64, 192_000, 192_001, 7_999, 33_000]) & (
        0xFFFFFFFF if kind == "I" else 0xFFFF
    )
    struct.pack_into("<" + kind, data, body + off, value)
    return bytes(data)
