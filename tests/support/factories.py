"""Small real media files for tests, built in memory."""

from __future__ import annotations

import base64
import io
import math
import struct
import wave
from typing import Any

from PIL import Image


def png_bytes(
    size: tuple[int, int] = (32, 24), colour: tuple[int, int, int] = (200, 30, 30)
) -> bytes:
    img = Image.new("RGB", size, colour)
    # A second colour so the image is not uniform.
    img.putpixel((0, 0), (0, 0, 0))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def noisy_png(seed: int, size: tuple[int, int] = (48, 36)) -> bytes:
    """Noise, so the vision stage really asks the provider (uniform images are not sent)."""
    import random

    rng = random.Random(seed)
    img = Image.new("RGB", size)
    img.putdata([tuple(rng.randrange(256) for _ in range(3)) for _ in range(size[0] * size[1])])
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def jpeg_bytes(size: tuple[int, int] = (64, 48)) -> bytes:
    img = Image.new("RGB", size, (10, 120, 200))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return out.getvalue()


def wav_bytes(seconds: float = 0.25, rate: int = 16000) -> bytes:
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return out.getvalue()


def mp3_like_bytes() -> bytes:
    """An ID3 header followed by an MPEG frame header: what MP3 files start with."""
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x64" + b"\x00" * 400


def ogg_like_bytes() -> bytes:
    return b"OggS\x00\x02" + b"\x00" * 20 + b"OpusHead" + b"\x00" * 200


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": b64(data), "mimeType": mime}


def audio_block(data: bytes, mime: str) -> dict[str, Any]:
    return {"type": "audio", "data": b64(data), "mimeType": mime}


def blob_resource(uri: str, data: bytes, mime: str = "application/pdf") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": b64(data)}}


def result(*blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"content": list(blocks), **extra}
