"""Images that fit the client: the `fit` image policy's limits and its downscaled copies.

The defaults are the limits agents hit with screenshots: Claude downscales any image whose
long side is over 1568 px (so more pixels cost bytes and buy nothing), its API rejects an
image over 5 MB, and Claude Desktop refuses a tool result over 1 MiB.

`max_image_bytes` caps the *encoded* size of one block, the base64 text in its `data`
field (4/3 of the file's bytes): that is what travels and what a client measures, and a
cap on it is also a cap on the raw bytes. `max_result_bytes` caps the whole result as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.bounded import DecodeBudget
from pipelines.image_headers import HeaderRefused, read_header
from pipelines.imaging import (
    DecompressionBomb,
    UnreadableImage,
    has_alpha,
    load_image,
    prepare_image,
)

MAX_IMAGE_SIDE = 1568
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_RESULT_BYTES = 1024 * 1024
# Room kept in the result for everything but the image: the JSON-RPC envelope, the MEDIA:
# line and summary, other text blocks. An image alone never fills the result cap.
RESULT_RESERVE = 64 * 1024
# Formats every vision client takes as they are; anything else is re-encoded.
SENDABLE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Sources whose pixels are exact: their copy is PNG first (sharp text), JPEG if PNG is too big.
LOSSLESS_SOURCES = frozenset({"png", "gif", "bmp", "tiff"})
# Downscaling a large PNG decodes all of it: a generous budget, still bounded.
FIT_BUDGET = DecodeBudget(timeout_s=30.0)


@dataclass(frozen=True, slots=True)
class FitLimits:
    max_side: int = MAX_IMAGE_SIDE  # px, the long side
    max_image_bytes: int = MAX_IMAGE_BYTES  # base64 characters of one image block
    max_result_bytes: int = MAX_RESULT_BYTES  # the whole result, as JSON

    def __post_init__(self) -> None:
        if self.max_side < 16:
            raise ValueError(f"max image side must be at least 16 px, not {self.max_side}")
        if self.max_image_bytes < 1024 or self.max_result_bytes < 1024:
            raise ValueError("max image bytes and max result bytes must be at least 1024")

    @property
    def image_budget(self) -> int:
        """Base64 characters one image may take: its own cap, and room in the result."""
        room = max(self.max_result_bytes - RESULT_RESERVE, self.max_result_bytes // 2)
        return min(self.max_image_bytes, room)


@dataclass(frozen=True, slots=True)
class FittedImage:
    """A downscaled, re-encoded copy of an image that was over a limit."""

    data: bytes
    mime: str
    width: int
    height: int
    source_width: int
    source_height: int
    source_bytes: int

    NOTE_START = "[image sent as a "

    def note(self) -> str:
        """Our own line under the MEDIA: tag: what was sent, and that the original is there."""
        return (
            f"{self.NOTE_START}{self.width}x{self.height} {self.mime.split('/')[1].upper()} "
            f"copy ({self.encoded_bytes} bytes as base64) to fit the client; the original, "
            f"{self.source_width}x{self.source_height} ({self.source_bytes} bytes), is at the "
            "MEDIA: path]"
        )

    @property
    def encoded_bytes(self) -> int:
        return encoded_size(len(self.data))


def encoded_size(raw_bytes: int) -> int:
    """Length of the base64 text of `raw_bytes` bytes."""
    return 4 * ((raw_bytes + 2) // 3)


def raw_budget(encoded: int) -> int:
    """The most raw bytes whose base64 text fits in `encoded` characters."""
    return 3 * (encoded // 4)


def fit_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The size within `max_side` on the long side, aspect kept; unchanged when it fits."""
    longest = max(width, height)
    if longest <= max_side:
        return width, height
    scale = max_side / longest
    return max(1, min(max_side, round(width * scale))), max(1, min(max_side, round(height * scale)))


def fits(width: int, height: int, size: int, mime: str, limits: FitLimits) -> bool:
    """Can the image go to the client as it is?"""
    return (
        mime in SENDABLE
        and max(width, height) <= limits.max_side
        and encoded_size(size) <= limits.image_budget
    )


def fit_image(
    path: Path, mime: str, limits: FitLimits, budget: DecodeBudget = FIT_BUDGET
) -> FittedImage | None:
    """None when the image at `path` fits the limits as it is; else a copy that does.

    Read with the vision stage's bounded loader: the header is checked against the decoding
    limits first, JPEGs decode at a reduced scale (draft), the decode runs under an address
    space cap and a time budget. Raises `pipelines.imaging.ImageError` (unreadable, bomb,
    decoding limit, or no encoding small enough).
    """
    data = path.read_bytes()
    try:
        header = read_header(data)
    except HeaderRefused as exc:
        if "pixel limit" in str(exc):
            raise DecompressionBomb(f"decompression bomb refused: {exc}") from None
        raise UnreadableImage(f"unreadable image: {exc}") from None
    if fits(header.width, header.height, len(data), mime, limits):
        return None
    del data
    loaded = load_image(path, max_side=limits.max_side, budget=budget)
    lossless = header.format in LOSSLESS_SOURCES or has_alpha(loaded.image)
    prepared = prepare_image(
        loaded.image,
        loaded.facts,
        max_side=limits.max_side,
        max_bytes=raw_budget(limits.image_budget),
        lossless=lossless,
    )
    return FittedImage(
        data=prepared.data,
        mime=prepared.mime,
        width=prepared.width,
        height=prepared.height,
        source_width=loaded.facts.width,
        source_height=loaded.facts.height,
        source_bytes=path.stat().st_size,
    )
