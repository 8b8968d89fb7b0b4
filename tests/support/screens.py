"""Synthetic screenshots: a desktop UI of any size (title bar, sidebar, buttons, text, a
chart and a photo-like panel), as PNG, for the image fit policy's tests and benchmark."""

from __future__ import annotations

import io
import random

from PIL import Image, ImageDraw, ImageFilter, ImageFont


def screenshot_png(width: int = 3840, height: int = 2160, seed: int = 7) -> bytes:
    """A screenshot-like PNG: flat UI colours and anti-aliased text, one noisy panel."""
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), (246, 247, 249))
    draw = ImageDraw.Draw(image)
    unit = max(1, height // 60)
    font = _font(max(10, unit))
    draw.rectangle((0, 0, width, 3 * unit), fill=(40, 44, 52))
    for i, colour in enumerate(((255, 95, 86), (255, 189, 46), (39, 201, 63))):
        x = unit + i * 2 * unit
        draw.ellipse((x, unit, x + unit, 2 * unit), fill=colour)
    draw.text((10 * unit, unit // 2), "mcp-media - build dashboard", fill="white", font=font)
    sidebar = width // 6
    draw.rectangle((0, 3 * unit, sidebar, height), fill=(230, 233, 238))
    for row in range(20):
        y = 5 * unit + row * 3 * unit
        draw.text((unit, y), f"project-{row:02d} / main", fill=(60, 60, 70), font=font)
    for col in range(4):
        x = sidebar + 2 * unit + col * 9 * unit
        draw.rounded_rectangle((x, 4 * unit, x + 8 * unit, 6 * unit), radius=unit // 2,
                               fill=(37, 99, 235))  # fmt: skip
        draw.text((x + unit, 4 * unit + unit // 3), f"Action {col}", fill="white", font=font)
    for row in range(30):
        y = 8 * unit + row * int(1.5 * unit)
        line = f"{row:3d}  build #{row * 37} passed in {rng.random() * 90:.1f} s  ok  " * 2
        draw.text((sidebar + 2 * unit, y), line, fill=(20, 20, 20), font=font)
    left, top = width * 2 // 3, 8 * unit
    bars = [rng.randint(unit, 20 * unit) for _ in range(12)]
    for i, bar in enumerate(bars):
        x = left + i * 2 * unit
        draw.rectangle((x, top + 22 * unit - bar, x + unit, top + 22 * unit), fill=(16, 185, 129))
    photo_w, photo_h = width // 4, height // 4
    photo = Image.frombytes("RGB", (photo_w, photo_h), rng.randbytes(photo_w * photo_h * 3))
    image.paste(
        photo.filter(ImageFilter.GaussianBlur(2)), (width - photo_w - unit, height - photo_h - unit)
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # an old Pillow without sized default fonts
        return ImageFont.load_default()
