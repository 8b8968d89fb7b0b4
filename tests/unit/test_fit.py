"""The `fit` image policy: sizes, encodings and the result cap, on real Pillow images."""

from __future__ import annotations

import base64
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from pipelines import MediaCache, ingest
from pipelines.bounded import DecodeBudget
from pipelines.cache import CacheLimits
from pipelines.fit import FitLimits, encoded_size, fit_image, fit_size, raw_budget
from pipelines.rewrite import ENVELOPE_BYTES, MediaPolicy, RewritePolicy, media_uri, rewrite_result
from tests.support.factories import b64, png_bytes
from tests.support.screens import screenshot_png

pytestmark = pytest.mark.unit
# Decodes in this process: the unit tier forks nothing (the bounded child is tested elsewhere).
HERE = DecodeBudget(isolate=False)


def _file(tmp_path: Path, data: bytes, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _encoded(image: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def _noise(size: tuple[int, int], seed: int = 3) -> Image.Image:
    rng = random.Random(seed)
    return Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))


def _opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@pytest.mark.parametrize(
    ("size", "fitted"),
    [
        ((3840, 2160), (1568, 882)),
        ((2160, 3840), (882, 1568)),
        ((8000, 10), (1568, 2)),
        ((1568, 1000), (1568, 1000)),
        ((640, 480), (640, 480)),
    ],
)
def test_fit_size_keeps_the_aspect_and_leaves_small_sizes_alone(
    size: tuple[int, int], fitted: tuple[int, int]
) -> None:
    assert fit_size(*size, 1568) == fitted


def test_the_byte_cap_is_on_the_base64_text() -> None:
    assert encoded_size(3) == 4 and encoded_size(4) == 8 and encoded_size(0) == 0
    for cap in (1024, 5 * 1024 * 1024, 1_000_001):
        assert encoded_size(raw_budget(cap)) <= cap < encoded_size(raw_budget(cap) + 4)
    # One image never takes the whole result: room is kept for its text.
    assert FitLimits().image_budget < FitLimits().max_result_bytes
    assert FitLimits(max_result_bytes=64 << 20).image_budget == 5 * 1024 * 1024


def test_an_image_within_every_limit_is_sent_as_it_is(tmp_path: Path) -> None:
    path = _file(tmp_path, png_bytes((1200, 800)), "small.png")
    assert fit_image(path, "image/png", FitLimits()) is None


def test_a_4k_screenshot_becomes_a_png_within_the_side(tmp_path: Path) -> None:
    path = _file(tmp_path, screenshot_png(3840, 2160), "screen.png")
    copy = fit_image(path, "image/png", FitLimits(), HERE)
    assert copy is not None and copy.mime == "image/png"
    assert (copy.width, copy.height) == (1568, 882)
    assert (copy.source_width, copy.source_height) == (3840, 2160)
    assert _opened(copy.data).size == (1568, 882)
    assert copy.encoded_bytes <= FitLimits().image_budget
    assert "1568x882 PNG" in copy.note() and "3840x2160" in copy.note()


def test_a_photo_stays_jpeg(tmp_path: Path) -> None:
    photo = _encoded(_noise((3000, 2000)), "JPEG", quality=90)
    copy = fit_image(_file(tmp_path, photo, "photo.jpg"), "image/jpeg", FitLimits(), HERE)
    assert copy is not None and copy.mime == "image/jpeg"
    assert _opened(copy.data).format == "JPEG"
    assert max(copy.width, copy.height) == 1568 and abs(copy.width / copy.height - 1.5) < 0.01


def test_a_png_too_big_as_png_falls_back_to_jpeg_under_the_byte_cap(tmp_path: Path) -> None:
    # Small enough on the side, too many bytes: noise does not compress as PNG.
    noisy = _encoded(_noise((1000, 1000)), "PNG")
    limits = FitLimits(max_image_bytes=400_000)
    assert encoded_size(len(noisy)) > limits.max_image_bytes
    copy = fit_image(_file(tmp_path, noisy, "noise.png"), "image/png", limits, HERE)
    assert copy is not None and copy.mime == "image/jpeg"
    assert copy.encoded_bytes <= 400_000 and max(copy.width, copy.height) <= 1000


def test_both_limits_at_once(tmp_path: Path) -> None:
    path = _file(tmp_path, screenshot_png(3840, 2160), "screen.png")
    limits = FitLimits(max_side=1000, max_image_bytes=40_000)
    copy = fit_image(path, "image/png", limits, HERE)
    assert copy is not None
    assert max(copy.width, copy.height) <= 1000 and copy.encoded_bytes <= 40_000
    assert abs(copy.width / copy.height - 3840 / 2160) < 0.02


def test_an_8000_px_image(tmp_path: Path) -> None:
    image = Image.new("RGB", (8000, 4500), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for x in range(0, 8000, 400):
        draw.rectangle((x, 100, x + 200, 4400), fill=(x % 255, 90, 160))
    path = _file(tmp_path, _encoded(image, "PNG"), "huge.png")
    copy = fit_image(path, "image/png", FitLimits(), HERE)
    assert copy is not None and (copy.width, copy.height) == (1568, 882)
    assert copy.encoded_bytes <= FitLimits().image_budget


def test_a_format_clients_do_not_take_is_re_encoded_even_when_small(tmp_path: Path) -> None:
    bmp = _encoded(Image.new("RGB", (64, 48), (10, 200, 30)), "BMP")
    copy = fit_image(_file(tmp_path, bmp, "small.bmp"), "image/bmp", FitLimits())
    assert copy is not None and copy.mime == "image/png" and (copy.width, copy.height) == (64, 48)


# The policy in a rewritten result


@pytest.fixture
def big_cache(tmp_path: Path) -> MediaCache:
    return MediaCache(tmp_path / "cache", CacheLimits(max_blob_bytes=64 << 20))


def _image(data: bytes, mime: str = "image/png", **extra: Any) -> dict[str, Any]:
    return {"type": "image", "data": b64(data), "mimeType": mime, **extra}


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def test_fit_sends_small_images_as_they_came_and_big_ones_as_copies(
    big_cache: MediaCache,
) -> None:
    small = _image(png_bytes((300, 200)))
    big = _image(screenshot_png(1900, 1000))  # decoded here: small enough not to fork
    original = {"content": [small, big]}
    rendered = ingest(original, cache=big_cache)
    out = rewrite_result(original, rendered, {}, RewritePolicy(images=MediaPolicy.FIT))
    content = out["content"]
    assert [b["type"] for b in content] == ["image", "text", "image", "text"]
    assert content[0] == small
    copy = _opened(base64.b64decode(content[2]["data"]))
    assert copy.width == 1568 and abs(copy.height - 825) <= 1
    assert content[2]["mimeType"] == "image/png"
    original_path = rendered.media[1].path
    assert content[3]["text"].startswith(f"MEDIA:{original_path}\n")
    assert original_path.read_bytes() == base64.b64decode(big["data"])
    assert "copy" in content[3]["text"] and "1900x1000" in content[3]["text"]
    assert _size(out) + ENVELOPE_BYTES <= FitLimits().max_result_bytes


def test_a_result_over_its_cap_moves_its_largest_media_to_links(big_cache: MediaCache) -> None:
    screens = [screenshot_png(1400, 900, seed=s) for s in (1, 2, 3)]
    original = {"content": [_image(data) for data in screens]}
    assert _size(original) > 300_000
    rendered = ingest(original, cache=big_cache)
    limits = FitLimits(max_result_bytes=300_000)
    out = rewrite_result(original, rendered, {}, RewritePolicy(images=MediaPolicy.FIT, fit=limits))
    assert _size(out) + ENVELOPE_BYTES <= 300_000
    kinds = [b["type"] for b in out["content"]]
    assert "resource_link" in kinds and "image" in kinds
    largest = max(rendered.media, key=lambda blob: blob.size)
    links = [b["uri"] for b in out["content"] if b["type"] == "resource_link"]
    assert media_uri(largest.sha256) in links
    for block, about in zip(out["content"], out["content"][1:], strict=False):
        if block["type"] == "resource_link":  # the text under it says what was sent
            assert "copy" not in about["text"] and "sent as a link" in about["text"], about
            assert block["uri"] in about["text"]
    for block in out["content"]:
        if block["type"] == "image":
            assert encoded_size(len(base64.b64decode(block["data"]))) <= limits.image_budget


@pytest.mark.parametrize("policy", list(MediaPolicy))
def test_every_policy_keeps_annotations_and_meta(policy: MediaPolicy, cache: MediaCache) -> None:
    notes = {"audience": ["user"], "priority": 0.4}
    meta = {"example.com/origin": "camera-2"}
    original = {"content": [_image(png_bytes(), annotations=notes, _meta=meta)]}
    rendered = ingest(original, cache=cache)
    out = rewrite_result(original, rendered, {}, RewritePolicy(images=policy))
    carrier = out["content"][0]
    assert carrier["annotations"] == notes and carrier["_meta"] == meta, carrier


# The door's flags


def test_the_proxy_takes_the_fit_flags_and_refuses_bad_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from workers.cli.common import CliError
    from workers.cli.main import build_parser
    from workers.cli.mcp import door_options

    parser = build_parser()
    args = parser.parse_args(["proxy", "--images", "fit", "--max-image-side", "800", "--", "x"])
    policy = door_options(args).policy
    assert policy.images is MediaPolicy.FIT
    assert policy.fit == FitLimits(max_side=800)
    for bad, said in (
        (["--max-image-side", "0"], "must be > 0, not 0"),
        (["--max-result-bytes", "1MB"], "not a whole number: '1MB'"),
        (["--audio", "fit"], "invalid choice: 'fit'"),
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(["proxy", *bad, "--", "x"])
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["intercept", "--images", "fit"])  # no server to answer its links
    tiny = parser.parse_args(["proxy", "--max-image-side", "8", "--", "x"])
    with pytest.raises(CliError, match="at least 16 px"):
        door_options(tiny)
