"""Image headers read in pure Python, before any decoder runs.

`read_header` names the container from its magic bytes (the allowlist), reads what the
decoder will be asked to allocate (canvas, tiles, bit depth, channels, progressive
coefficient buffers) and counts what makes decoders slow (chunks, scans, IFD entries,
frames). Anything outside the limits raises `HeaderRefused` with a message that names
the limit; nothing here allocates more than the file's own bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from PIL import Image, features

# The allowlist: these containers and nothing else reach a Pillow plugin (Image.open is
# always called with `formats=` from this table).
PILLOW_FORMATS: dict[str, str] = {
    "png": "PNG",
    "jpeg": "JPEG",
    "gif": "GIF",
    "webp": "WEBP",
    "bmp": "BMP",
    "tiff": "TIFF",
    "avif": "AVIF",
}

# Limits checked from the header (see SECURITY.md for the figures of a run).
MAX_PIXELS = 64_000_000
MAX_SIDE = 65_535
# What the decoder allocates for pixels (canvas or the largest tile/strip, at the decoded
# bit depth and channel count, alpha included) and for progressive JPEG coefficients.
MAX_DECODE_BYTES = 256 * 1024 * 1024
MAX_PNG_CHUNKS = 20_000
MAX_JPEG_SCANS = 64
MAX_JPEG_SEGMENTS = 2_000
MAX_TIFF_ENTRIES = 512
MAX_BITS_PER_SAMPLE = 16
MAX_TIFF_BITS = 32  # float and 32-bit integer samples
MAX_CHANNELS = 5


class HeaderRefused(ValueError):
    """The header names a format outside the allowlist or asks for more than the limits."""


@dataclass(frozen=True, slots=True)
class ImageHeader:
    format: str  # a key of PILLOW_FORMATS
    width: int
    height: int
    decode_bytes: int  # the estimate checked against MAX_DECODE_BYTES
    progressive: bool = False

    @property
    def pillow_format(self) -> str:
        return PILLOW_FORMATS[self.format]


def avif_supported() -> bool:
    return bool(features.check("avif"))


def detect_format(head: bytes) -> str | None:
    """The allowlisted container the magic bytes name, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head.startswith(b"BM") and len(head) >= 26:
        return "bmp"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[4:8] == b"ftyp" and head[8:12] in (b"avif", b"avis") and avif_supported():
        return "avif"
    return None


# Signatures of what we refuse, only to name it in the marker.
_OTHER_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"%!PS", "PostScript/EPS"),
    (0, b"\xc5\xd0\xd3\xc6", "EPS (DOS binary)"),
    (0, b"SIMPLE  =", "FITS"),
    (0, b"\x1f\x8b", "gzip"),
    (0, b"/* XPM */", "XPM"),
    (0, b"\x00\x00\x01\x00", "ICO"),
    (0, b"\x00\x00\x02\x00", "CUR or TGA"),
    (0, b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (0, b"\xff\x4f\xff\x51", "JPEG 2000 codestream"),
    (0, b"8BPS", "PSD"),
    (0, b"DDS ", "DDS"),
    (0, b"icns", "ICNS"),
    (0, b"qoif", "QOI"),
    (0, b"%PDF", "PDF"),
    (0, b"PK\x03\x04", "zip"),
    (0, b"\x01\x00\x00\x00", "WMF/EMF"),
    (0, b"\xd7\xcd\xc6\x9a", "WMF"),
    (0, b"#define", "XBM"),
    (0, b"P1", "PBM"),
    (0, b"P2", "PGM"),
    (0, b"P3", "PPM"),
    (0, b"P4", "PBM"),
    (0, b"P5", "PGM"),
    (0, b"P6", "PPM"),
    (0, b"RIFF", "RIFF (not WebP)"),
    (0, b"OggS", "Ogg"),
    (0, b"ID3", "MP3"),
    (0, b"MZ", "Windows executable"),
    (0, b"\x7fELF", "ELF executable"),
    (0, b"\x0a", "PCX"),
    (0, b"\x01\xda", "SGI"),
    (0, b"\x59\xa6\x6a\x95", "Sun raster"),
)


def describe_unknown(head: bytes) -> str:
    """A short name for bytes outside the allowlist, for the `not_image` marker."""
    if head[4:8] == b"ftyp":
        brand = head[8:12].decode("ascii", "replace")
        if head[8:12] in (b"avif", b"avis"):
            return "AVIF (not supported by this Pillow build)"
        return f"ISO media ({brand!r})"
    for offset, magic, name in _OTHER_SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return name
    if not head:
        return "empty"
    if len(head) >= 18 and head[2] in (1, 2, 3, 9, 10, 11) and head[1] in (0, 1):
        return "unknown (possibly TGA)"
    return "unknown"


def read_header(data: bytes) -> ImageHeader:
    """Check the whole file's structure against the limits; raise HeaderRefused."""
    fmt = detect_format(data[:64])
    if fmt is None:
        raise HeaderRefused(f"format not allowed: {describe_unknown(data[:64])}")
    # Import the plugins here, in the caller, never in a forked decoder child (a child
    # forked while another thread held the import lock would wait for it forever).
    Image.init()
    reader = _READERS[fmt]
    try:
        header = reader(data)
    except (struct.error, IndexError) as exc:
        raise HeaderRefused(f"{fmt} header is truncated or malformed ({exc})") from None
    return _checked(header)


def _checked(h: ImageHeader) -> ImageHeader:
    if h.width <= 0 or h.height <= 0:
        raise HeaderRefused(f"{h.format} header declares an empty canvas {h.width}x{h.height}")
    if max(h.width, h.height) > MAX_SIDE or h.width * h.height > MAX_PIXELS:
        raise HeaderRefused(
            f"{h.format} {h.width}x{h.height} exceeds the {MAX_PIXELS} pixel limit "
            "(decompression bomb)"
        )
    if h.decode_bytes > MAX_DECODE_BYTES:
        raise HeaderRefused(
            f"{h.format} {h.width}x{h.height} would need {h.decode_bytes // 2**20} MiB to decode, "
            f"over the {MAX_DECODE_BYTES // 2**20} MiB budget"
        )
    return h


def _bits(format_: str, bits: int, most: int = MAX_BITS_PER_SAMPLE) -> int:
    """Bytes a decoded sample takes, for a bit depth within 1-`most`."""
    if bits <= 0 or bits > most:
        raise HeaderRefused(f"{format_} bit depth {bits} is outside 1-{most}")
    return (bits + 7) // 8


# PNG: IHDR, then every chunk header (length + type) up to IEND, without reading data.

_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _png(data: bytes) -> ImageHeader:
    pos = 8
    width = height = 0
    channels = sample = 1
    chunks = 0
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        chunks += 1
        if chunks > MAX_PNG_CHUNKS:
            raise HeaderRefused(f"png has more than {MAX_PNG_CHUNKS} chunks")
        if chunks == 1:
            if kind != b"IHDR" or length != 13:
                raise HeaderRefused("png does not start with an IHDR chunk")
            width, height, depth, colour = struct.unpack_from(">IIBB", data, pos + 8)
            if colour not in _PNG_CHANNELS:
                raise HeaderRefused(f"png colour type {colour} is invalid")
            channels = _PNG_CHANNELS[colour]
            # Palette images decode to one byte per pixel; tRNS may add an alpha channel.
            sample = 1 if colour == 3 else _bits("png", depth)
            if colour in (0, 2, 3):
                channels += 1  # a tRNS chunk can make Pillow add alpha
        if kind == b"IEND":
            break
        pos += 12 + length
    if chunks == 0:
        raise HeaderRefused("png has no chunks")
    return ImageHeader("png", width, height, width * height * channels * sample)


# JPEG: every marker segment; entropy-coded data is skipped by looking for the next marker.

_SOF_PROGRESSIVE = frozenset({0xC2, 0xC6, 0xCA, 0xCE})
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> ImageHeader:
    pos = 2
    scans = segments = 0
    width = height = components = 0
    precision = 8
    progressive = False
    size = len(data)
    while pos < size:
        if data[pos] != 0xFF:
            # Entropy-coded data (after SOS): find the next marker that is not a stuffed
            # zero byte or a restart marker.
            pos = _next_marker(data, pos)
            if pos < 0:
                break
            continue
        while pos < size and data[pos] == 0xFF:
            pos += 1  # fill bytes
        if pos >= size:
            break
        marker = data[pos]
        pos += 1
        if marker == 0xD9:  # EOI
            break
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            continue
        segments += 1
        if segments > MAX_JPEG_SEGMENTS:
            raise HeaderRefused(f"jpeg has more than {MAX_JPEG_SEGMENTS} segments")
        (length,) = struct.unpack_from(">H", data, pos)
        if marker in _SOF:
            precision, height, width, components = struct.unpack_from(">BHHB", data, pos + 2)
            progressive = marker in _SOF_PROGRESSIVE
        elif marker == 0xDA:
            scans += 1
            if scans > MAX_JPEG_SCANS:
                raise HeaderRefused(
                    f"jpeg has more than {MAX_JPEG_SCANS} scans (progressive scan bomb)"
                )
        pos += length
    if width == 0 or height == 0:
        raise HeaderRefused("jpeg has no frame header with a size (SOF)")
    if components not in (1, 3, 4):
        raise HeaderRefused(f"jpeg has {components} components")
    sample = _bits("jpeg", precision)
    # Decoded at 1/8 scale (draft mode) when baseline; a progressive file keeps one 16-bit
    # coefficient per sample of the whole image until the last scan.
    blocks = ((width + 7) // 8) * ((height + 7) // 8)
    # Multi-scan sequential files buffer every coefficient too.
    coefficients = blocks * 64 * components * 2 if progressive or scans > 1 else 0
    output = blocks * max(components, 3) * sample
    return ImageHeader("jpeg", width, height, coefficients + output, progressive)


def _next_marker(data: bytes, pos: int) -> int:
    while True:
        pos = data.find(b"\xff", pos)
        if pos < 0 or pos + 1 >= len(data):
            return -1
        following = data[pos + 1]
        if following == 0x00 or 0xD0 <= following <= 0xD7 or following == 0xFF:
            pos += 1 if following == 0xFF else 2
            continue
        return pos


# GIF: the logical screen; Pillow decodes only the first frame into a P or RGBA image.


def _gif(data: bytes) -> ImageHeader:
    width, height = struct.unpack_from("<HH", data, 6)
    return ImageHeader("gif", width, height, width * height * 4)


# BMP: the info header (core or Windows).


def _bmp(data: bytes) -> ImageHeader:
    (info_size,) = struct.unpack_from("<I", data, 14)
    if info_size == 12:
        width, height, _, bpp = struct.unpack_from("<HHHH", data, 18)
    elif info_size >= 40:
        width, height, _, bpp = struct.unpack_from("<iiHH", data, 18)
    else:
        raise HeaderRefused(f"bmp info header of {info_size} bytes")
    height = abs(height)
    if bpp not in (1, 2, 4, 8, 16, 24, 32):
        raise HeaderRefused(f"bmp with {bpp} bits per pixel")
    return ImageHeader("bmp", width, height, width * height * 4)


# WebP: VP8 (lossy), VP8L (lossless) or VP8X (extended) canvas.


def _webp(data: bytes) -> ImageHeader:
    kind = data[12:16]
    if kind == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
    elif kind == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        width = 1 + (bits & 0x3FFF)
        height = 1 + ((bits >> 14) & 0x3FFF)
    elif kind == b"VP8 ":
        width, height = struct.unpack_from("<HH", data, 26)
        width &= 0x3FFF
        height &= 0x3FFF
    else:
        raise HeaderRefused(f"webp chunk {kind!r} is not VP8, VP8L or VP8X")
    # libwebp decodes into an RGBA buffer that Pillow then copies.
    return ImageHeader("webp", width, height, width * height * 4 * 2)


# TIFF: the first IFD (the one Pillow decodes); tiles and strips as declared.

_TIFF_TYPES = {1: 1, 2: 1, 3: 2, 4: 4, 6: 1, 7: 1, 8: 2, 9: 4, 16: 8, 17: 8}


def _tiff(data: bytes) -> ImageHeader:
    order = "<" if data[:2] == b"II" else ">"
    (offset,) = struct.unpack_from(order + "I", data, 4)
    (count,) = struct.unpack_from(order + "H", data, offset)
    if count > MAX_TIFF_ENTRIES:
        raise HeaderRefused(f"tiff IFD has {count} entries, over {MAX_TIFF_ENTRIES}")
    tags: dict[int, list[int]] = {}
    for i in range(count):
        tag, kind, n, value = struct.unpack_from(order + "HHI4s", data, offset + 2 + 12 * i)
        if tag not in (256, 257, 258, 277, 278, 322, 323, 338):
            continue
        width_of = _TIFF_TYPES.get(kind, 1)
        n = min(n, 16)
        raw = value if width_of * n <= 4 else data[_u32(order, value) :][: width_of * n]
        fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[width_of]
        tags[tag] = list(struct.unpack_from(f"{order}{n}{fmt}", raw))
    width = tags.get(256, [0])[0]
    height = tags.get(257, [0])[0]
    bits = max(tags.get(258, [1]))
    samples = tags.get(277, [1])[0]
    if samples < 1 or samples > MAX_CHANNELS:
        raise HeaderRefused(f"tiff with {samples} samples per pixel")
    sample = _bits("tiff", bits, MAX_TIFF_BITS)
    pixel = samples * sample
    canvas = width * height * max(pixel, 4)
    buffer = 0
    if 322 in tags or 323 in tags:
        tile_w = tags.get(322, [0])[0]
        tile_h = tags.get(323, [0])[0]
        if tile_w <= 0 or tile_h <= 0:
            raise HeaderRefused(f"tiff tile {tile_w}x{tile_h} is empty")
        buffer = tile_w * tile_h * pixel
    else:
        rows = min(tags.get(278, [height])[0] or height, height)
        buffer = width * rows * pixel
    return ImageHeader("tiff", width, height, canvas + buffer)


def _u32(order: str, value: bytes) -> int:
    return int(struct.unpack(order + "I", value)[0])


# AVIF: the largest `ispe` (image spatial extent) property.


def _avif(data: bytes) -> ImageHeader:
    width = height = 0
    pos = data.find(b"ispe", 0, 1 << 20)
    while pos >= 0:
        w, h = struct.unpack_from(">II", data, pos + 8)
        width, height = max(width, w), max(height, h)
        pos = data.find(b"ispe", pos + 4, 1 << 20)
    # libavif decodes to YUV (up to 16 bits a sample), then to RGBA.
    return ImageHeader("avif", width, height, width * height * (6 + 4))


_READERS = {
    "png": _png,
    "jpeg": _jpeg,
    "gif": _gif,
    "bmp": _bmp,
    "webp": _webp,
    "tiff": _tiff,
    "avif": _avif,
}
