"""Pillow helpers for the vision stage: safe loading, re-encoding to a budget, image facts."""

from __future__ import annotations

import base64
import colorsys
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageStat

from pipelines.bounded import ChildRefusal, DecodeBudget, DecodeRefused, run_bounded
from pipelines.errors import PermanentError
from pipelines.image_headers import HeaderRefused, read_header
from pipelines.outcomes import Outcome
from pipelines.png_chunks import decodable

# Pillow's own default (89.5 MP), restated so the limit never depends on a process global.
# The header check of pipelines.image_headers (64 MP) applies first.
DEFAULT_MAX_PIXELS = 89_478_485
_ORIENTATION = 0x0112
_ROTATED = frozenset({5, 6, 7, 8})  # EXIF orientations that swap width and height
_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_PLAIN_MODES = ("L", "LA", "RGB", "RGBA")
_MIN_ENCODE_SIDE = 64


class ImageError(PermanentError):
    """The image itself cannot be described; retrying will not help."""

    outcome = Outcome.UNREADABLE_IMAGE


class UnreadableImage(ImageError):
    """Not an image Pillow can decode (corrupt, truncated, unknown format)."""


class DecompressionBomb(ImageError):
    """The header announces more pixels than the configured limit."""

    outcome = Outcome.IMAGE_TOO_LARGE


class DecodeLimitExceeded(ImageError):
    """Decoding was stopped by the time budget or the address-space cap."""

    outcome = Outcome.IMAGE_TOO_LARGE


class ImageTooLarge(ImageError):
    """No encoding of the image fits the byte budget."""

    outcome = Outcome.IMAGE_TOO_LARGE


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What the file is, as displayed (EXIF rotation applied to width/height)."""

    width: int
    height: int
    format: str
    mode: str


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """The image as it is sent to a provider: downscaled, re-encoded, metadata stripped."""

    data: bytes
    mime: str
    width: int
    height: int
    source: ImageFacts

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class Blank:
    """A near-uniform image: its mean colour, or transparent."""

    colour: str
    transparent: bool


@dataclass(frozen=True, slots=True)
class LoadedImage:
    """The first frame, decoded at <= max_side, in L, LA, RGB or RGBA; and its facts."""

    image: Image.Image
    facts: ImageFacts


def load_image(
    path: Path,
    *,
    max_side: int,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    budget: DecodeBudget | None = None,
) -> LoadedImage:
    """Check the header, then decode the first frame at <= max_side in a bounded child.

    The format is decided by the magic bytes (the allowlist) and the header is checked
    against the decoding limits before any decoder runs; Pillow is restricted to that one
    plugin and runs under an address-space cap and a time budget (`pipelines.bounded`).
    """
    try:
        header = read_header(path.read_bytes())
    except HeaderRefused as exc:
        if "pixel limit" in str(exc):
            raise DecompressionBomb(f"decompression bomb refused: {exc}") from None
        raise UnreadableImage(f"unreadable image: {exc}") from None
    except OSError as exc:
        raise UnreadableImage(f"unreadable image: {type(exc).__name__}: {exc}") from exc
    if header.width * header.height > max_pixels:
        raise DecompressionBomb(
            f"decompression bomb refused: {header.width}x{header.height} = "
            f"{header.width * header.height} pixels exceeds the limit of {max_pixels}"
        )
    try:
        reply, raw = run_bounded(
            lambda: _decode_frame(path, header.pillow_format, max_side, max_pixels),
            budget or DecodeBudget(),
            header.decode_bytes,
        )
    except DecodeRefused as exc:
        if exc.reason == "bomb":
            raise DecompressionBomb(exc.message) from None
        if exc.reason == "error":
            raise UnreadableImage(exc.message) from None
        raise DecodeLimitExceeded(f"decoding limit ({exc.reason}): {exc.message}") from None
    frame = Image.frombytes(str(reply["frame_mode"]), (reply["frame_w"], reply["frame_h"]), raw)
    facts = ImageFacts(
        width=int(reply["width"]),
        height=int(reply["height"]),
        format=str(reply["format"]),
        mode=str(reply["mode"]),
    )
    return LoadedImage(frame, facts)


def _decode_frame(
    path: Path, pillow_format: str, max_side: int, max_pixels: int
) -> tuple[dict[str, Any], bytes]:
    """In the bounded child: open, refuse bombs, decode the first frame at <= max_side."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(decodable(path, pillow_format), formats=[pillow_format])
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ChildRefusal("bomb", f"decompression bomb refused: {exc}") from exc
    except Exception as exc:
        # Pillow's format plugins raise many exception types for malformed input.
        raise ChildRefusal("error", f"unreadable image: {type(exc).__name__}: {exc}") from exc
    with image:
        width, height = image.size
        if width * height > max_pixels:
            raise ChildRefusal(
                "bomb",
                f"decompression bomb refused: {width}x{height} = {width * height} pixels "
                f"exceeds the limit of {max_pixels}",
            )
        fmt = image.format or "unknown"
        mode = image.mode
        try:
            orientation = image.getexif().get(_ORIENTATION, 1)
            if image.format == "JPEG" or image.mode in _PLAIN_MODES:
                # thumbnail() decodes JPEGs at a reduced scale (draft mode): cheap for big photos.
                image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
                frame = to_plain(image)
            else:
                # Palette and 16-bit images resize badly or not at all: convert first.
                frame = to_plain(image)
                frame.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
            if orientation in _TRANSPOSE:
                frame = frame.transpose(_TRANSPOSE[orientation])
        except MemoryError:
            raise
        except Exception as exc:
            raise ChildRefusal("error", f"unreadable image: {type(exc).__name__}: {exc}") from exc
    if orientation in _ROTATED:
        width, height = height, width
    reply = {
        "frame_mode": frame.mode,
        "frame_w": frame.width,
        "frame_h": frame.height,
        "width": width,
        "height": height,
        "format": fmt,
        "mode": mode,
    }
    return reply, frame.tobytes()


_SIXTEEN_BIT = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})


def to_plain(image: Image.Image) -> Image.Image:
    """A new, loaded image in L, LA, RGB or RGBA (never the file-backed original).

    16-bit and 32-bit integer samples are scaled, not clipped, to 8 bits (a 16-bit grey
    of 30,000 is mid-grey, not white); float samples in 0-1 are scaled to 0-255; palette
    and CMYK images are converted, keeping transparency as alpha.
    """
    if image.mode in _PLAIN_MODES:
        return image.copy()
    if has_alpha(image):
        return image.convert("RGBA")
    if image.mode in _SIXTEEN_BIT or image.mode in ("I", "F"):
        return _scaled_to_l(image)
    if image.mode == "1":
        return image.convert("L")
    return image.convert("RGB")


def _scaled_to_l(image: Image.Image) -> Image.Image:
    wide = image.convert("F") if image.mode == "F" else image.convert("I")
    low, high = (float(v) for v in wide.getextrema())  # type: ignore[arg-type]
    if image.mode in _SIXTEEN_BIT or (low >= 0 and 255 < high <= 65535):
        scale, offset = 1 / 257, 0.0
    elif image.mode == "F" and low >= 0 and high <= 1.0:
        scale, offset = 255.0, 0.0
    elif low >= 0 and high <= 255:
        scale, offset = 1.0, 0.0
    else:
        span = (high - low) or 1.0
        scale, offset = 255.0 / span, -low * 255.0 / span
    floats = wide.convert("F").point(lambda v: v * scale + offset)
    return floats.convert("L")


def has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (
        image.mode == "P" and "transparency" in image.info
    )


def to_rgb(image: Image.Image, background: tuple[int, int, int] = (255, 255, 255)) -> Image.Image:
    """Flatten onto `background`: what a viewer shows for transparent pixels."""
    if image.mode not in _PLAIN_MODES:
        image = to_plain(image)
    if has_alpha(image):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*background, 255))
        canvas.alpha_composite(rgba)
        return canvas.convert("RGB")
    return image.convert("RGB")


def blank_check(image: Image.Image, tolerance: int) -> Blank | None:
    """Return the colour when no channel varies by more than `tolerance` levels.

    Any mode is normalised first (`to_plain`): 16-bit, float, palette, CMYK, alpha.
    """
    if image.mode not in _PLAIN_MODES:
        image = to_plain(image)
    if has_alpha(image):
        _, alpha_high = image.convert("RGBA").getchannel("A").getextrema()
        if alpha_high == 0:
            return Blank(colour="transparent", transparent=True)
    rgb = to_rgb(image)
    extrema = rgb.getextrema()
    spread = max(int(high) - int(low) for low, high in extrema)  # type: ignore[misc]
    if spread > tolerance:
        return None
    return Blank(colour=hex_colour(mean_colour(rgb)), transparent=False)


def mean_colour(image: Image.Image) -> tuple[int, int, int]:
    r, g, b = (round(v) for v in ImageStat.Stat(to_rgb(image)).mean[:3])
    return r, g, b


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def prepare_image(
    image: Image.Image,
    source: ImageFacts,
    *,
    max_side: int,
    max_bytes: int,
    lossless: bool | None = None,
) -> PreparedImage:
    """Re-encode within `max_bytes`: PNG for graphics and transparency, else JPEG.

    Always re-encoded, never passed through: this strips EXIF (GPS) and other metadata
    before the bytes leave the machine, and gives providers one of the formats they accept.
    `lossless` True tries PNG first whatever the image looks like (False: JPEG only; None:
    PNG for graphics and transparency); JPEG is the fallback when PNG does not fit.
    """
    work = image.copy()
    work.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    if _looks_like_graphic(work) if lossless is None else lossless:
        data = _encode(work, "PNG")
        if len(data) <= max_bytes:
            return PreparedImage(data, "image/png", work.width, work.height, source)
    work = to_rgb(work)
    while True:
        for quality in (85, 70, 55):
            data = _encode(work, "JPEG", quality=quality)
            if len(data) <= max_bytes:
                return PreparedImage(data, "image/jpeg", work.width, work.height, source)
        if max(work.size) <= _MIN_ENCODE_SIDE:
            raise ImageTooLarge(f"no encoding fits {max_bytes} bytes")
        smaller = (max(1, int(work.width * 0.7)), max(1, int(work.height * 0.7)))
        work = work.resize(smaller, Image.Resampling.LANCZOS)


def _looks_like_graphic(image: Image.Image) -> bool:
    # Screenshots, charts and text have few colours; PNG keeps their edges sharp.
    return has_alpha(image) or image.convert("RGB").getcolors(maxcolors=1024) is not None


def _encode(image: Image.Image, fmt: str, quality: int = 85) -> bytes:
    out = io.BytesIO()
    if fmt == "PNG":
        keep = image if image.mode in ("1", "L", "LA", "RGB", "RGBA") else image.convert("RGBA")
        keep.save(out, "PNG", optimize=False)
    else:
        image.save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


_NAMED_HUES = (
    (15, "red"),
    (40, "orange"),
    (70, "yellow"),
    (165, "green"),
    (195, "cyan"),
    (255, "blue"),
    (290, "purple"),
    (335, "pink"),
    (360, "red"),
)


def colour_name(rgb: tuple[int, int, int]) -> str:
    """A plain English name for an sRGB colour (coarse on purpose)."""
    r, g, b = (c / 255 for c in rgb)
    hue, lightness, saturation = colorsys.rgb_to_hls(r, g, b)
    if saturation < 0.15 or lightness < 0.08 or lightness > 0.95:
        if lightness < 0.12:
            return "black"
        if lightness > 0.88:
            return "white"
        return "dark grey" if lightness < 0.45 else "grey" if lightness < 0.7 else "light grey"
    degrees = hue * 360
    name = next(label for limit, label in _NAMED_HUES if degrees < limit)
    if name in ("orange", "red") and lightness < 0.35:
        return "brown"
    if lightness < 0.3:
        return f"dark {name}"
    if lightness > 0.8:
        return f"light {name}"
    return name


def dominant_colours(
    image: Image.Image, *, top: int = 3, min_share: float = 0.02
) -> list[tuple[str, float]]:
    """Named colours covering at least `min_share` of the (flattened) image, largest first."""
    # NEAREST samples real pixels: averaging would turn black text on white into grey.
    sample = to_rgb(image)
    sample.thumbnail((128, 128), Image.Resampling.NEAREST)
    counts: dict[str, int] = {}
    for count, pixel in sample.getcolors(maxcolors=128 * 128) or []:
        assert isinstance(pixel, tuple)
        name = colour_name((pixel[0], pixel[1], pixel[2]))
        counts[name] = counts.get(name, 0) + count
    total = sum(counts.values()) or 1
    ranked = sorted(counts.items(), key=lambda item: item[1], reverse=True)
    return [(name, n / total) for name, n in ranked[:top] if n / total >= min_share]
