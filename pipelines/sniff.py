"""Magic-byte detection of image and audio containers, and MIME -> extension.

The claimed MIME type of an MCP block is a hint from a possibly hostile server; the
extension we store under always comes from the bytes.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from pipelines.bounded import ChildRefusal, DecodeBudget, DecodeRefused, run_bounded
from pipelines.image_headers import (
    MAX_PIXELS,
    HeaderRefused,
    ImageHeader,
    detect_format,
    read_header,
)
from pipelines.png_chunks import decodable

# How many leading bytes the detectors need at most.
HEAD_BYTES = 64


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    ext: str
    mime: str


PNG = Format("png", ".png", "image/png")
JPEG = Format("jpeg", ".jpg", "image/jpeg")
GIF = Format("gif", ".gif", "image/gif")
BMP = Format("bmp", ".bmp", "image/bmp")
WEBP = Format("webp", ".webp", "image/webp")
TIFF = Format("tiff", ".tiff", "image/tiff")
AVIF = Format("avif", ".avif", "image/avif")

# The image allowlist (pipelines.image_headers.PILLOW_FORMATS): name -> stored format.
_FORMATS = {
    "png": PNG,
    "jpeg": JPEG,
    "gif": GIF,
    "bmp": BMP,
    "webp": WEBP,
    "tiff": TIFF,
    "avif": AVIF,
}

WAV = Format("wav", ".wav", "audio/wav")
OGG = Format("ogg", ".ogg", "audio/ogg")
MP3 = Format("mp3", ".mp3", "audio/mpeg")
FLAC = Format("flac", ".flac", "audio/flac")
M4A = Format("m4a", ".m4a", "audio/mp4")
WEBM = Format("webm", ".webm", "audio/webm")
AAC = Format("aac", ".aac", "audio/aac")


def sniff_image(head: bytes) -> Format | None:
    """The allowlisted image container named by the first bytes, or None."""
    found = detect_format(head)
    return None if found is None else _FORMATS[found]


def sniff_audio(head: bytes) -> Format | None:
    """The audio container named by the first bytes, or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return WAV
    if head.startswith(b"OggS"):
        return OGG
    if head.startswith(b"fLaC"):
        return FLAC
    if head[4:8] == b"ftyp":
        return M4A
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return WEBM
    if head.startswith(b"ID3"):
        return MP3
    if len(head) >= 2 and head[0] == 0xFF:
        # MPEG audio frame sync: 11 set bits. Layer bits 00 mean ADTS AAC, not MP3.
        if head[1] & 0xE0 == 0xE0 and head[1] & 0x06 != 0:
            return MP3
        if head[1] & 0xF6 == 0xF0:
            return AAC
    return None


def looks_like_markup(head: bytes) -> bool:
    """HTML error pages and SVG are text; refuse them where pixels were promised."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return text.startswith((b"<", b"{")) or b"<svg" in text or b"<html" in text


_MIME_EXTENSIONS: dict[str, str] = {
    "application/pdf": ".pdf",
    "application/json": ".json",
    "application/zip": ".zip",
    "application/gzip": ".gz",
    "application/x-tar": ".tar",
    "application/xml": ".xml",
    "application/msword": ".doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.ms-excel": ".xls",
    "application/octet-stream": ".bin",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "text/html": ".html",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/avif": ".avif",
    "image/svg+xml": ".svg",
    "audio/ogg": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/flac": ".flac",
    "audio/mp4": ".m4a",
    "audio/webm": ".webm",
    "video/mp4": ".mp4",
}


def extension_for_mime(mime: str | None) -> str:
    """A file extension for a MIME type; `.bin` when unknown."""
    if not mime:
        return ".bin"
    base = mime.split(";", 1)[0].strip().lower()
    return _MIME_EXTENSIONS.get(base, ".bin")


# Larger images are refused as decompression bombs before any pixel is decoded
# (Pillow's own default warns at 89 MP and only errors at twice that).
DEFAULT_MAX_IMAGE_PIXELS = MAX_PIXELS


class ImageCheckError(ValueError):
    """The bytes are not a decodable image; the message says why."""


def verify_image(
    path: Path,
    head: bytes,
    max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    budget: DecodeBudget | None = None,
    *,
    name: str = "the file",
) -> Format:
    """Prove the file is a whole image of an allowed format, within the decoding limits.

    The container is decided by the magic bytes and its header checked against the limits
    (`pipelines.image_headers`) before any decoder runs; then Pillow, restricted to that
    one plugin, decodes it (JPEG at 1/8 scale) in a child process under an address-space
    cap and a time budget (`pipelines.bounded`). Error messages call the file `name` (for
    ingest: the block, e.g. `block 2 (image/png)`), never by its path: the path is a temp
    file that is gone by the time anyone reads it.
    """
    if looks_like_markup(head) and detect_format(head) is None:
        raise ImageCheckError("not an image: the bytes are markup (HTML/SVG)")
    try:
        header = read_header(path.read_bytes())
    except HeaderRefused as exc:
        raise ImageCheckError(f"not an image: {exc}") from None
    except OSError as exc:
        raise ImageCheckError(f"not an image: cannot read it ({exc.strerror})") from None
    if header.width * header.height > max_pixels:
        raise ImageCheckError(
            f"not an image: {header.width}x{header.height} exceeds the {max_pixels} pixel limit "
            "(decompression bomb)"
        )
    try:
        run_bounded(
            lambda: _decode_check(path, header), budget or DecodeBudget(), header.decode_bytes
        )
    except DecodeRefused as exc:
        # Pillow's "cannot identify image file '<path>'" names the temp file: name the block.
        message = _without_path(exc.message, path, name)
        if exc.reason == "error":
            raise ImageCheckError(f"not an image: {message}") from None
        raise ImageCheckError(f"not an image: decoding limit ({exc.reason}): {message}") from None
    return _FORMATS[header.format]


def _decode_check(path: Path, header: ImageHeader) -> tuple[dict[str, Any], bytes]:
    with warnings.catch_warnings():
        # Pillow warns about odd metadata (corrupt EXIF, ...): not our concern here.
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            source = decodable(path, header.pillow_format)
            with Image.open(source, formats=[header.pillow_format]) as img:
                width, height = img.size
                if width * height > header.width * header.height:
                    raise ChildRefusal(
                        "error",
                        f"the decoder sees {width}x{height}, "
                        f"the header {header.width}x{header.height}",
                    )
                if header.format == "jpeg":
                    img.draft("RGB", (max(1, width // 8), max(1, height // 8)))
                img.load()
                return {"mode": img.mode, "width": width, "height": height}, b""
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ChildRefusal("error", f"decompression bomb ({exc})") from exc
        except UnidentifiedImageError as exc:
            raise ChildRefusal("error", _why_unread(path, header) or str(exc)) from exc
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            # Pillow reports truncation and corruption as OSError/SyntaxError.
            raise ChildRefusal("error", str(exc)) from exc


def _why_unread(path: Path, header: ImageHeader) -> str | None:
    """What the format's own plugin says of a file `Image.open` could not identify: Pillow
    reports every plugin's failure as "cannot identify image file", which hides a damaged
    chunk (a PNG chunk's checksum, say) behind a header that was read well."""
    factory = Image.OPEN[header.pillow_format][0]
    try:
        with path.open("rb") as fp:
            factory(fp, path.name).close()
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError) as exc:
        return f"damaged {header.pillow_format}: " + re.sub(r"b'([^']*)'", r"\1", str(exc))
    return None


def _without_path(message: str, path: Path, name: str) -> str:
    """`message` with every spelling of `path` (quoted or not) replaced by `name`."""
    text = str(path)
    for spelling in (repr(text), f'"{text}"', text):
        message = message.replace(spelling, name)
    return message
