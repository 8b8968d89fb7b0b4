"""Bounded decoding with the real decoders: the allowlist, the header limits, the forked
child's address-space cap and time budget, audio limits, and honest summaries of images
in every mode (16-bit, palette, alpha, CMYK, float)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from pipelines import image_headers
from pipelines.bounded import DecodeBudget, DecodeRefused, run_bounded
from pipelines.image_headers import HeaderRefused, read_header
from pipelines.imaging import (
    DecodeLimitExceeded,
    UnreadableImage,
    blank_check,
    load_image,
    to_plain,
)
from pipelines.sniff import ImageCheckError, verify_image
from pipelines.speech.audio import AudioLimitError, decode_audio
from pipelines.vision import VisionConfig, low_information_statement
from tests.corpus import build

pytestmark = pytest.mark.unit


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_every_allowed_format_is_detected_and_decoded(tmp_path: Path) -> None:
    formats = ["PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF"]
    if image_headers.avif_supported():
        formats.append("AVIF")
    for fmt in formats:
        out = io.BytesIO()
        Image.new("RGB", (40, 30), (10, 120, 200)).save(out, format=fmt)
        path = write(tmp_path, f"x.{fmt.lower()}", out.getvalue())
        stored = verify_image(path, out.getvalue()[:64])
        assert stored.name == image_headers.detect_format(out.getvalue()[:64]), fmt
        loaded = load_image(path, max_side=100)
        assert (loaded.facts.width, loaded.facts.height) == (40, 30)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (build.EPS, "PostScript/EPS"),
        (build.XPM, "XPM"),
        (build.ico(), "ICO"),
        (build.jpeg2000_rgba16(), "JPEG 2000"),
        (b"SIMPLE  =                    T" + b" " * 50, "FITS"),
    ],
)
def test_formats_outside_the_allowlist_are_named_and_never_decoded(
    data: bytes, named: str, tmp_path: Path
) -> None:
    path = write(tmp_path, "x.png", data)
    with pytest.raises(ImageCheckError, match=f"format not allowed: {named}"):
        verify_image(path, data[:64])
    with pytest.raises(UnreadableImage, match=f"format not allowed: {named}"):
        load_image(path, max_side=100)


def _png_with_a_bad_crc(chunk: bytes) -> bytes:
    """A 32x32 palette PNG carrying an ICC profile, whose `chunk` fails its checksum."""
    out = io.BytesIO()
    Image.new("P", (32, 32), 7).save(out, "PNG", icc_profile=b"\0" * 200)
    data = bytearray(out.getvalue())
    at = data.index(chunk)
    data[at + 4 + int.from_bytes(data[at - 4 : at], "big")] ^= 0xFF  # the chunk's CRC
    return bytes(data)


def test_an_ancillary_chunk_failing_its_checksum_is_dropped_as_libpng_does(
    tmp_path: Path,
) -> None:
    """iCCP with a bad CRC (as the MCP reference server's tiny image has): viewers show the
    image, and so is it read here; the checks and the loader agree."""
    data = _png_with_a_bad_crc(b"iCCP")
    path = write(tmp_path, "x.png", data)
    assert verify_image(path, data[:64]).name == "png"
    loaded = load_image(path, max_side=100)
    assert (loaded.facts.width, loaded.facts.height) == (32, 32)
    assert path.read_bytes() == data  # the file is left as it came


@pytest.mark.parametrize("chunk", [b"IHDR", b"PLTE"])
def test_a_critical_chunk_failing_its_checksum_is_named(chunk: bytes, tmp_path: Path) -> None:
    """Pillow's "cannot identify image file" hid which chunk; the PNG plugin's own reason is
    given."""
    data = _png_with_a_bad_crc(chunk)
    path = write(tmp_path, "x.png", data)
    with pytest.raises(ImageCheckError) as refused:
        verify_image(path, data[:64], name="block 1 (image/png)")
    assert str(refused.value) == (
        f"not an image: damaged PNG: broken PNG file (bad header checksum in {chunk.decode()})"
    )


def test_header_limits_name_what_they_refuse() -> None:
    with pytest.raises(HeaderRefused, match="more than 64 scans"):
        read_header(build.progressive_jpeg_scan_bomb(side=64, scans=100))
    with pytest.raises(HeaderRefused, match="2047 MiB to decode"):
        read_header(build.tiff_tile_bomb())
    with pytest.raises(HeaderRefused, match="more than 20000 chunks"):
        read_header(build.png_many_chunks(20_001))
    assert read_header(build.png_many_chunks(100)).width == 1
    # A progressive 8000x8000 colour JPEG keeps 384 MiB of coefficients: over the budget.
    with pytest.raises(HeaderRefused, match="MiB budget"):
        read_header(_progressive_header(8000, 3))
    assert read_header(_progressive_header(4000, 1)).progressive


def _progressive_header(side: int, components: int) -> bytes:
    out = io.BytesIO()
    mode = "RGB" if components == 3 else "L"
    Image.new(mode, (16, 16)).save(out, format="JPEG", progressive=True)
    data = bytearray(out.getvalue())
    sof = data.find(b"\xff\xc2")
    data[sof + 5 : sof + 9] = side.to_bytes(2, "big") * 2
    return bytes(data)


@pytest.mark.integration  # starts a process
def test_an_allocation_over_the_address_space_cap_is_stopped_in_the_child() -> None:
    def greedy() -> tuple[dict[str, object], bytes]:
        return {"n": len(bytearray(256 * 1024 * 1024))}, b""

    with pytest.raises(DecodeRefused) as refused:
        run_bounded(greedy, DecodeBudget(address_space=16 * 1024 * 1024))
    assert refused.value.reason == "memory"
    assert run_bounded(greedy, DecodeBudget())[0] == {"n": 256 * 1024 * 1024}


@pytest.mark.integration  # starts a process
def test_a_decode_over_the_address_space_cap_is_refused(tmp_path: Path) -> None:
    """The cap is on the child's growth: a 7000x7000 decode (147 MB) under a 16 MiB cap."""
    out = io.BytesIO()
    Image.new("RGB", (7000, 7000), (90, 20, 200)).save(out, format="PNG", compress_level=1)
    path = write(tmp_path, "big.png", out.getvalue())
    tight = DecodeBudget(address_space=16 * 1024 * 1024)
    with pytest.raises(ImageCheckError, match=r"decoding limit \(memory\)"):
        verify_image(path, out.getvalue()[:64], budget=tight)
    with pytest.raises(DecodeLimitExceeded, match=r"\(memory\)"):
        load_image(path, max_side=100, budget=tight)
    # The same file within the default budget decodes.
    assert load_image(path, max_side=100).facts.width == 7000


@pytest.mark.integration  # starts a process
def test_a_decode_over_the_time_budget_is_killed(tmp_path: Path) -> None:
    def endless() -> tuple[dict[str, object], bytes]:
        while True:
            pass

    with pytest.raises(DecodeRefused) as refused:
        run_bounded(endless, DecodeBudget(timeout_s=0.5))
    assert refused.value.reason == "timeout"


@pytest.mark.integration  # starts a process
def test_a_crashing_decoder_is_a_refusal_not_a_dead_caller() -> None:
    def crash() -> tuple[dict[str, object], bytes]:
        import ctypes

        ctypes.string_at(0)  # SIGSEGV in the child
        return {}, b""

    with pytest.raises(DecodeRefused) as refused:
        run_bounded(crash, DecodeBudget())
    assert refused.value.reason == "crashed"


@pytest.mark.integration  # starts a process
def test_the_child_answer_round_trips_bytes() -> None:
    reply, raw = run_bounded(lambda: ({"n": 3}, b"\x00\xff" * 100_000), DecodeBudget())
    assert reply == {"n": 3} and raw == b"\x00\xff" * 100_000


# Audio limits.


def test_audio_limits_refuse_before_decoding() -> None:
    with pytest.raises(AudioLimitError, match="sample rate 1 Hz"):
        decode_audio(build.wav_1hz_block_align(), 16_000)
    with pytest.raises(AudioLimitError, match="64 channels"):
        decode_audio(build.wav_64_channels(), 16_000)
    bad_align = build.wav_header(channels=1, rate=16_000, block_align=33_000, data=b"\x00" * 64)
    with pytest.raises(AudioLimitError, match="block align 33000"):
        decode_audio(bad_align, 16_000)
    fine = build.wav_header(channels=2, rate=48_000, block_align=4, data=b"\x00\x01" * 9600)
    assert decode_audio(fine, 16_000).duration_s == pytest.approx(0.1, abs=0.01)


def test_stream_limits_apply_to_other_containers() -> None:
    """A Matroska PCM stream at 4 kHz: no WAV header to read, FFmpeg's parameters decide."""
    out = io.BytesIO()
    with av.open(out, "w", format="matroska") as container:
        stream = container.add_stream("pcm_s16le", rate=4000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 4000), dtype=np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 4000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with pytest.raises(AudioLimitError, match="sample rate 4000 Hz"):
        decode_audio(out.getvalue(), 16_000)


# Honest summaries: dark text on grey in every mode is never "blank".


def _text_on_grey() -> Image.Image:
    image = Image.new("L", (320, 120), 150)
    draw = ImageDraw.Draw(image)
    draw.text((10, 30), "Invoice 2041", fill=20, font=ImageFont.load_default(size=40))
    return image


def _as(mode: str, tmp_path: Path) -> Path:
    grey = _text_on_grey()
    out = io.BytesIO()
    if mode == "I;16":
        grey.convert("I").point(lambda v: v * 257).convert("I;16").save(out, format="PNG")
    elif mode == "P":
        grey.convert("RGB").quantize(16).save(out, format="PNG")
    elif mode == "PA":
        paletted = grey.convert("RGB").quantize(16)
        paletted.info["transparency"] = 0
        paletted.save(out, format="PNG", transparency=0)
    elif mode == "LA":
        Image.merge("LA", (grey, Image.new("L", grey.size, 255))).save(out, format="PNG")
    elif mode == "RGBA":
        grey.convert("RGBA").save(out, format="PNG")
    elif mode == "CMYK":
        grey.convert("CMYK").save(out, format="JPEG", quality=95)
    elif mode == "F":
        grey.point(lambda v: v / 255.0, "F").save(out, format="TIFF")
    elif mode == "I":
        grey.convert("I").point(lambda v: v * 257).save(out, format="TIFF")
    else:
        raise AssertionError(mode)
    return write(tmp_path, f"text-{mode.replace(';', '')}", out.getvalue())


@pytest.mark.parametrize("mode", ["I;16", "P", "PA", "LA", "RGBA", "CMYK", "F", "I"])
def test_dark_text_on_grey_is_not_called_blank_in_any_mode(mode: str, tmp_path: Path) -> None:
    path = _as(mode, tmp_path)
    with Image.open(path) as raw:
        assert raw.mode != "L"  # the file really is in the odd mode
        assert blank_check(raw, tolerance=8) is None  # raw modes are normalised first
        plain = to_plain(raw)
    assert plain.mode in ("L", "LA", "RGB", "RGBA")
    low, high = plain.convert("L").getextrema()
    assert isinstance(low, int | float) and isinstance(high, int | float)
    assert low < 60 and 120 < high < 200, (low, high)  # dark text, grey ground: not clipped
    loaded = load_image(path, max_side=1568)
    config = VisionConfig()
    assert low_information_statement(loaded.image, loaded.facts, config) is None


def test_a_uniform_16_bit_grey_is_blank_and_grey_not_white(tmp_path: Path) -> None:
    out = io.BytesIO()
    Image.new("I;16", (64, 64), 30_000).save(out, format="PNG")
    path = write(tmp_path, "grey16.png", out.getvalue())
    loaded = load_image(path, max_side=1568)
    statement = low_information_statement(loaded.image, loaded.facts, VisionConfig())
    # 30000 / 257 = 116.7: mid-grey #747474, where clipping to 8 bits said #ffffff.
    assert statement is not None and "#747474" in statement, statement


@pytest.mark.integration  # starts a process
def test_ghostscript_is_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `gs` on PATH that leaves a mark: PostScript labelled image/png never reaches it."""
    from PIL import EpsImagePlugin

    from pipelines import MediaCache, ingest

    ran = tmp_path / "gs-ran"
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "gs"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {ran}\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ.get('PATH', '')}")
    monkeypatch.setattr(EpsImagePlugin, "gs_binary", None)
    path = write(tmp_path, "x.png", build.EPS)
    with pytest.raises(ImageCheckError, match="PostScript"):
        verify_image(path, build.EPS[:64])
    with pytest.raises(UnreadableImage, match="PostScript"):
        load_image(path, max_side=100)
    out = ingest(build.result(build.image(build.EPS)), cache=MediaCache(tmp_path / "cache"))
    assert [m.reason.value for m in out.markers] == ["not_image"]
    assert not ran.exists()
    # The fake is real: Pillow, asked without the allowlist, does look for and run it.
    with pytest.raises(OSError), Image.open(path) as unrestricted:
        unrestricted.load()
    assert ran.exists()
