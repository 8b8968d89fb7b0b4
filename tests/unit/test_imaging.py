"""Pillow helpers: safe loading, bombs, re-encoding within a budget, blank detection."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from pipelines.imaging import (
    DEFAULT_MAX_PIXELS,
    DecompressionBomb,
    ImageFacts,
    ImageTooLarge,
    UnreadableImage,
    blank_check,
    colour_name,
    dominant_colours,
    load_image,
    prepare_image,
)

pytestmark = pytest.mark.unit


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height but whose data is a few bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def noise(size: tuple[int, int]) -> Image.Image:
    grey = Image.effect_noise(size, 90)
    return Image.merge(
        "RGB", (grey, grey.rotate(90), grey.transpose(Image.Transpose.FLIP_TOP_BOTTOM))
    )


@pytest.mark.integration  # starts a process
def test_load_reports_facts_and_downscales(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    Image.new("RGB", (3000, 1000), "red").save(path)

    loaded = load_image(path, max_side=600)

    assert loaded.facts == ImageFacts(width=3000, height=1000, format="PNG", mode="RGB")
    assert loaded.image.size == (600, 200)


def test_big_jpeg_is_downscaled(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    noise((4000, 3000)).save(path, quality=80)

    loaded = load_image(path, max_side=1568)

    assert loaded.facts.format == "JPEG"
    assert (loaded.facts.width, loaded.facts.height) == (4000, 3000)
    assert max(loaded.image.size) == 1568


def test_exif_rotation_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "rotated.jpg"
    image = Image.new("RGB", (200, 100), "blue")
    exif = image.getexif()
    exif[0x0112] = 6  # camera held sideways: displayed as 100x200
    image.save(path, exif=exif)

    loaded = load_image(path, max_side=1568)

    assert (loaded.facts.width, loaded.facts.height) == (100, 200)
    assert loaded.image.size == (100, 200)


def test_palette_image_is_converted(tmp_path: Path) -> None:
    path = tmp_path / "anim.gif"
    frames = [Image.new("P", (400, 300), i) for i in (1, 2)]
    frames[0].save(path, save_all=True, append_images=frames[1:], transparency=0)

    loaded = load_image(path, max_side=100)

    assert loaded.facts.format == "GIF"
    assert loaded.image.mode in ("RGB", "RGBA")
    assert loaded.image.size == (100, 75)


@pytest.mark.parametrize(
    ("width", "height"),
    [(100_000, 100_000), (10_000, 10_000)],  # above 2x Pillow's limit (error), 1x-2x (warning)
)
def test_decompression_bomb_header_is_refused(tmp_path: Path, width: int, height: int) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(width, height))
    assert width * height > DEFAULT_MAX_PIXELS

    with pytest.raises(DecompressionBomb, match="decompression bomb"):
        load_image(path, max_side=1568)


def test_own_pixel_limit_applies(tmp_path: Path) -> None:
    path = tmp_path / "small.png"
    Image.new("RGB", (100, 100), "white").save(path)

    with pytest.raises(DecompressionBomb, match="100x100"):
        load_image(path, max_side=1568, max_pixels=9_999)
    assert load_image(path, max_side=1568, max_pixels=10_000).facts.width == 100


@pytest.mark.parametrize(
    "content",
    [b"not an image at all", b"", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40],
)
def test_garbage_is_unreadable(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.png"
    path.write_bytes(content)

    with pytest.raises(UnreadableImage):
        load_image(path, max_side=1568)


def test_truncated_image_is_unreadable(tmp_path: Path) -> None:
    out = io.BytesIO()
    noise((300, 300)).save(out, "PNG")
    path = tmp_path / "cut.png"
    path.write_bytes(out.getvalue()[: len(out.getvalue()) // 2])

    with pytest.raises(UnreadableImage):
        load_image(path, max_side=1568)


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UnreadableImage, match="FileNotFoundError"):
        load_image(tmp_path / "nope.png", max_side=1568)


FACTS = ImageFacts(width=1, height=1, format="PNG", mode="RGB")


def test_graphics_stay_png() -> None:
    image = Image.new("RGB", (400, 300), "white")
    image.paste((0, 0, 0), (10, 10, 200, 50))

    prepared = prepare_image(image, FACTS, max_side=1568, max_bytes=1 << 20)

    assert prepared.mime == "image/png"
    assert Image.open(io.BytesIO(prepared.data)).format == "PNG"


def test_photos_fit_the_byte_budget_as_jpeg() -> None:
    image = noise((1500, 1000))

    prepared = prepare_image(image, FACTS, max_side=1568, max_bytes=60_000)

    assert prepared.mime == "image/jpeg"
    assert len(prepared.data) <= 60_000
    decoded = Image.open(io.BytesIO(prepared.data))
    assert decoded.size == (prepared.width, prepared.height)
    assert prepared.data_url().startswith("data:image/jpeg;base64,/9j/")


def test_impossible_budget_raises() -> None:
    with pytest.raises(ImageTooLarge):
        prepare_image(noise((500, 500)), FACTS, max_side=1568, max_bytes=100)


def test_metadata_is_stripped(tmp_path: Path) -> None:
    path = tmp_path / "gps.jpg"
    image = noise((300, 200))
    exif = image.getexif()
    exif[0x010F] = "CameraMaker"  # Make
    image.save(path, exif=exif)
    with Image.open(path) as original:
        assert original.getexif()

    loaded = load_image(path, max_side=1568)
    prepared = prepare_image(loaded.image, loaded.facts, max_side=1568, max_bytes=1 << 20)

    assert not Image.open(io.BytesIO(prepared.data)).getexif()
    assert b"CameraMaker" not in prepared.data


def test_blank_check() -> None:
    white = Image.new("RGB", (50, 50), (255, 255, 255))
    assert blank_check(white, tolerance=8) is not None
    assert blank_check(white, tolerance=8).colour == "#ffffff"  # type: ignore[union-attr]

    nearly = white.copy()
    nearly.putpixel((3, 3), (250, 250, 250))
    assert blank_check(nearly, tolerance=8) is not None

    speck = white.copy()
    speck.putpixel((3, 3), (0, 0, 0))
    assert blank_check(speck, tolerance=8) is None

    clear = Image.new("RGBA", (50, 50), (12, 34, 56, 0))
    result = blank_check(clear, tolerance=8)
    assert result is not None and result.transparent

    logo = clear.copy()
    logo.putpixel((10, 10), (0, 0, 0, 255))
    assert blank_check(logo, tolerance=8) is None


@pytest.mark.parametrize(
    ("rgb", "name"),
    [
        ((0, 0, 0), "black"),
        ((255, 255, 255), "white"),
        ((128, 128, 128), "grey"),
        ((220, 20, 20), "red"),
        ((20, 160, 40), "green"),
        ((30, 60, 220), "blue"),
        ((250, 220, 30), "yellow"),
        ((120, 60, 20), "brown"),
    ],
)
def test_colour_names(rgb: tuple[int, int, int], name: str) -> None:
    assert colour_name(rgb) == name


def test_dominant_colours_see_thin_dark_text() -> None:
    image = Image.new("RGB", (900, 260), "white")
    for x in range(0, 900, 10):  # 30% of columns black, like strokes of text
        image.paste((0, 0, 0), (x, 0, x + 3, 260))

    names = [name for name, _ in dominant_colours(image)]

    assert names[:2] == ["white", "black"]
