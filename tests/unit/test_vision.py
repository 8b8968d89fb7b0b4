"""The vision stage against the real openai client and a fake server over a real socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageFont

from pipelines.engines.openai_vision import OpenAIVisionProvider
from pipelines.engines.registry import vision_provider
from pipelines.errors import ConfigError, Skipped, Stopped
from pipelines.imaging import PreparedImage
from pipelines.outcomes import Outcome
from pipelines.results import StageOutcome, Status
from pipelines.vision import (
    DegradedReason,
    LocalVisionProvider,
    ProviderKind,
    StopAsked,
    VisionConfig,
    clean_text,
    processor_version,
    summarize_image,
)
from tests.support.fake_openai import FakeOpenAI, FakeOpenAIControl, Mode

pytestmark = pytest.mark.unit

SECRET = "sk-test-secret-never-shown"
ROOT = Path(__file__).resolve().parents[2]
FONT_PATHS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def openai_config(base_url: str, **changes: object) -> VisionConfig:
    options: dict[str, object] = {
        "provider": ProviderKind.OPENAI,
        "base_url": base_url,
        "api_key": SECRET,
        "model": "fake-vision-1",
        "timeout": 5.0,
    }
    options.update(changes)
    return VisionConfig(**options)  # type: ignore[arg-type]


def describe(path: Path, config: VisionConfig) -> StageOutcome:
    """Run the stage with a fresh real provider."""
    with OpenAIVisionProvider(config) as provider:
        return summarize_image(path, config, provider)


@pytest.fixture
def picture(tmp_path: Path) -> Path:
    path = tmp_path / "picture.png"
    image = Image.new("RGB", (320, 200), "white")
    ImageDraw.Draw(image).rectangle((20, 20, 200, 120), fill="red")
    image.save(path)
    return path


@pytest.mark.integration  # starts a process
def test_done_path_sends_model_prompt_and_image(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(reply="A red rectangle on a white background.")
    config = openai_config(fake.base_url, prompt="What is this?")

    outcome = describe(picture, config)

    assert outcome.status is Status.DONE
    assert outcome.output["summary"] == "A red rectangle on a white background."
    assert outcome.output["reason"] is None
    assert outcome.output["model"] == "fake-vision-1"
    assert outcome.output["facts"] is not None and (
        outcome.output["facts"]["width"],
        outcome.output["facts"]["height"],
    ) == (320, 200)
    [request] = fake.received
    assert (request.model, request.prompt) == ("fake-vision-1", "What is this?")
    assert (request.image_width, request.image_height) == (320, 200)
    assert request.image_mime == "image/png"
    assert request.headers.get("authorization") == f"Bearer {SECRET}"


def test_api_key_never_appears_in_reprs_or_results(fake: FakeOpenAI, picture: Path) -> None:
    config = openai_config(fake.base_url)
    outcome = describe(picture, config)

    assert SECRET not in repr(config)
    assert SECRET not in repr(outcome)
    assert SECRET not in json.dumps(dict(outcome.output))


def test_slow_provider_degrades_within_the_timeout(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(mode=Mode.SLOW, delay=60)

    outcome = describe(picture, openai_config(fake.base_url, timeout=1.0))

    assert outcome.status is Status.DEGRADED
    assert outcome.output["reason"] == DegradedReason.TIMEOUT
    assert outcome.output["summary"] is None
    assert outcome.output["retryable"]
    assert outcome.outcome is Outcome.TIMEOUT


def test_a_stop_asked_while_the_provider_holds_the_request_ends_the_wait(
    fake: FakeOpenAI, picture: Path
) -> None:
    fake.set(mode=Mode.SLOW, delay=60)
    config = openai_config(fake.base_url, timeout=120.0)
    asked: list[int] = []

    def should_stop() -> bool:  # says stop once the request is being held
        asked.append(fake.stats()["in_flight"])
        return asked[-1] > 0

    with OpenAIVisionProvider(config) as provider, pytest.raises(Stopped):
        summarize_image(picture, config, provider, should_stop)
    assert asked[0] == 0 and asked[-1] == 1  # asked before the call, then while it waited
    assert len(fake.received) == 1


def test_a_stop_asked_before_the_provider_is_called_sends_nothing(
    fake: FakeOpenAI, picture: Path
) -> None:
    config = openai_config(fake.base_url)
    with OpenAIVisionProvider(config) as provider, pytest.raises(Stopped):
        summarize_image(picture, config, provider, lambda: True)
    assert fake.received == []


@pytest.mark.parametrize("chunked", [False, True])
def test_drip_response_hits_the_total_deadline(
    fake: FakeOpenAI, picture: Path, chunked: bool
) -> None:
    # Every byte arrives well within any per-read timeout; only a total deadline stops it.
    fake.set(mode=Mode.DRIP, drip_interval=0.1, chunked=chunked)

    outcome = describe(picture, openai_config(fake.base_url, timeout=1.5))

    assert outcome.output["reason"] == DegradedReason.TIMEOUT


@pytest.mark.parametrize("chunked", [False, True])
def test_huge_body_is_capped(fake: FakeOpenAI, picture: Path, chunked: bool) -> None:
    fake.set(mode=Mode.HUGE, chunked=chunked)

    outcome = describe(picture, openai_config(fake.base_url, timeout=10.0))

    assert outcome.output["reason"] == DegradedReason.RESPONSE_TOO_LARGE


@pytest.mark.parametrize(
    ("mode", "reason", "code"),
    [
        (Mode.INVALID_JSON, DegradedReason.INVALID_RESPONSE, Outcome.PROVIDER_UNAVAILABLE),
        (Mode.EMPTY, DegradedReason.EMPTY_RESPONSE, Outcome.PROVIDER_REJECTED),
        (Mode.NO_CHOICES, DegradedReason.EMPTY_RESPONSE, Outcome.PROVIDER_REJECTED),
        (Mode.CLOSE, DegradedReason.CONNECTION_ERROR, Outcome.PROVIDER_UNAVAILABLE),
    ],
)
def test_bad_answers_degrade_with_their_reason(
    fake: FakeOpenAI, picture: Path, mode: Mode, reason: DegradedReason, code: Outcome
) -> None:
    fake.set(mode=mode)

    outcome = describe(picture, openai_config(fake.base_url))

    assert outcome.status is Status.DEGRADED
    assert outcome.output["reason"] == reason
    assert outcome.output["summary"] is None
    assert outcome.outcome is code


def test_server_error_is_retried_once_then_degrades(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(mode=Mode.ERROR, status=500)

    outcome = describe(picture, openai_config(fake.base_url, max_retries=1))

    assert outcome.output["reason"] == DegradedReason.HTTP_ERROR
    assert outcome.output["detail"] is not None and "HTTP 500" in outcome.output["detail"]
    assert outcome.output["retryable"]
    assert outcome.outcome is Outcome.PROVIDER_UNAVAILABLE
    assert fake.request_count == 2


def test_client_error_is_not_retried(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(mode=Mode.ERROR, status=404)

    outcome = describe(picture, openai_config(fake.base_url, max_retries=3))

    assert outcome.output["reason"] == DegradedReason.HTTP_ERROR
    assert outcome.output["detail"] is not None and "HTTP 404" in outcome.output["detail"]
    assert not outcome.output["retryable"]
    assert outcome.outcome is Outcome.PROVIDER_REJECTED
    assert fake.request_count == 1


def test_connection_refused(picture: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on `port` now.

    outcome = describe(picture, openai_config(f"http://127.0.0.1:{port}/v1"))

    assert outcome.output["reason"] == DegradedReason.CONNECTION_REFUSED
    assert outcome.outcome is Outcome.PROVIDER_UNAVAILABLE


def test_large_image_reaches_provider_downscaled(fake: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "huge.jpg"
    image = Image.new("RGB", (6000, 4000), "white")
    ImageDraw.Draw(image).ellipse((500, 500, 5000, 3500), fill="navy")
    image.save(path, quality=90)

    outcome = describe(path, openai_config(fake.base_url))

    assert outcome.status is Status.DONE
    [request] = fake.received
    assert request.image_width is not None and request.image_height is not None
    assert max(request.image_width, request.image_height) <= 1568
    assert (request.image_width, request.image_height) == (1568, 1045)
    assert request.image_bytes <= VisionConfig().max_image_bytes
    assert outcome.output["facts"] is not None and outcome.output["facts"]["width"] == 6000


@pytest.mark.parametrize(
    ("size", "colour", "expected"),
    [
        ((1, 1), "white", "Blank or near-uniform image (1x1 pixels, colour #ffffff)"),
        ((800, 600), (30, 60, 90), "Blank or near-uniform image (800x600 pixels, colour #1e3c5a)"),
        ((12, 400), None, "Tiny image (12x400 pixels"),
    ],
)
def test_low_information_images_never_reach_the_provider(
    fake: FakeOpenAI,
    tmp_path: Path,
    size: tuple[int, int],
    colour: str | tuple[int, int, int] | None,
    expected: str,
) -> None:
    path = tmp_path / "low.png"
    image = Image.new("RGB", size, colour or "white")
    if colour is None:
        ImageDraw.Draw(image).line((0, 0, size[0], size[1]), fill="black", width=3)
    image.save(path)

    outcome = describe(path, openai_config(fake.base_url))

    assert outcome.status is Status.DONE
    assert outcome.output["summary"] is not None and outcome.output["summary"].startswith(expected)
    assert fake.request_count == 0


def test_decompression_bomb_degrades_without_a_request(fake: FakeOpenAI, tmp_path: Path) -> None:
    from tests.unit.test_imaging import png_header_only

    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(60_000, 60_000))

    outcome = describe(path, openai_config(fake.base_url))

    assert outcome.status is Status.DEGRADED
    assert outcome.output["reason"] == DegradedReason.DECOMPRESSION_BOMB
    assert outcome.output["detail"] is not None and "decompression bomb" in outcome.output["detail"]
    assert not outcome.output["retryable"]
    assert outcome.outcome is Outcome.IMAGE_TOO_LARGE
    assert fake.request_count == 0


def test_unreadable_image_degrades(fake: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "fake.png"
    path.write_bytes(b"<html>not an image</html>")

    outcome = describe(path, openai_config(fake.base_url))

    assert outcome.output["reason"] == DegradedReason.UNREADABLE_IMAGE
    assert outcome.output["facts"] is None
    assert outcome.outcome is Outcome.UNREADABLE_IMAGE
    assert fake.request_count == 0


def test_reply_is_cleaned_and_capped(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(reply="\x1b[31mRed\x07 box\u202e\r\nline two\twith tab " + "word " * 200)

    outcome = describe(picture, openai_config(fake.base_url, max_output_chars=100))

    assert outcome.output["summary"] is not None
    assert outcome.output["summary"].startswith("[31mRed box\nline two\twith tab word")
    assert len(outcome.output["summary"]) <= 100
    assert outcome.output["summary"].endswith("…")
    assert not any(ch in outcome.output["summary"] for ch in "\x1b\x07\u202e\r")


def test_control_characters_only_is_empty(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(reply="\x00\x01\x1b \x7f")

    outcome = describe(picture, openai_config(fake.base_url))

    assert outcome.output["reason"] == DegradedReason.EMPTY_RESPONSE


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_clean_text_never_leaks_controls_or_length(text: str, limit: int) -> None:
    cleaned = clean_text(text, limit)

    assert len(cleaned) <= limit
    assert all(ch in "\n\t" or ord(ch) >= 0x20 for ch in cleaned)
    assert not any(0x7F <= ord(ch) <= 0x9F for ch in cleaned)


def test_one_provider_serves_concurrent_calls(fake: FakeOpenAI, picture: Path) -> None:
    fake.set(latency=0.5)
    config = openai_config(fake.base_url)
    outcomes: list[StageOutcome] = []
    with OpenAIVisionProvider(config) as provider:
        threads = [
            threading.Thread(
                target=lambda: outcomes.append(summarize_image(picture, config, provider))
            )
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)

    assert [o.status for o in outcomes] == [Status.DONE] * 4
    assert fake.max_in_flight == 4


def test_processor_version_tracks_what_shapes_the_output() -> None:
    base = VisionConfig(provider=ProviderKind.OPENAI, model="a", api_key="k1")
    version = processor_version(base)

    assert len(version) == 12
    assert processor_version(VisionConfig(provider=ProviderKind.OPENAI, model="a")) == version
    changed = [
        VisionConfig(provider=ProviderKind.OPENAI, model="b"),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", prompt="other"),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", max_side=1024),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", min_side=8),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", uniform_tolerance=2),
        VisionConfig(provider=ProviderKind.LOCAL),
    ]
    assert all(processor_version(config) != version for config in changed)
    same = [
        VisionConfig(provider=ProviderKind.OPENAI, model="a", api_key="k2"),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", timeout=3.0),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", max_concurrency=9),
        VisionConfig(provider=ProviderKind.OPENAI, model="a", base_url="http://other/v1"),
    ]
    assert all(processor_version(config) == version for config in same)


def test_config_is_validated() -> None:
    assert VisionConfig(provider="openai", model="m").provider is ProviderKind.OPENAI  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        VisionConfig(provider="gpt")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        VisionConfig(timeout=0)
    with pytest.raises(ConfigError):
        OpenAIVisionProvider(VisionConfig(provider=ProviderKind.OPENAI, model=" "))
    with pytest.raises(Skipped):
        vision_provider(VisionConfig(provider=ProviderKind.NONE))


class BrokenProvider:
    def describe(self, image: PreparedImage, should_stop: StopAsked | None = None) -> str:
        raise RuntimeError("bug in a provider")


def test_unexpected_provider_exception_fails_open(picture: Path) -> None:
    outcome = summarize_image(picture, VisionConfig(), BrokenProvider())

    assert outcome.status is Status.DEGRADED
    assert outcome.output["reason"] == DegradedReason.PROVIDER_ERROR
    assert outcome.output["detail"] == "RuntimeError: bug in a provider"


def render_text(path: Path, lines: list[str]) -> None:
    font_path = next((p for p in FONT_PATHS if p.exists()), None)
    font = ImageFont.truetype(str(font_path), 44) if font_path else ImageFont.load_default(size=44)
    image = Image.new("RGB", (900, 260), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((30, 40 + 100 * i), line, fill="black", font=font)
    image.save(path)


def test_local_provider_reads_text(tmp_path: Path) -> None:
    path = tmp_path / "text.png"
    render_text(path, ["Quarterly revenue 2024", "Invoice 4471 paid"])
    config = VisionConfig(provider=ProviderKind.LOCAL)
    provider = vision_provider(config)
    assert isinstance(provider, LocalVisionProvider)

    outcome = summarize_image(path, config, provider)

    assert outcome.status is Status.DONE, outcome.output["detail"]
    assert outcome.output["summary"] is not None
    assert outcome.output["summary"].startswith(
        "PNG image, 900x260, mostly white with black; text (OCR):"
    )
    text = outcome.output["summary"].lower()
    for word in ("quarterly", "revenue", "2024", "invoice", "4471", "paid"):
        assert word in text


@pytest.mark.integration  # starts a process
def test_fake_server_runs_as_a_process(picture: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_openai", "--port", "0", "--mode", "empty"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        control = FakeOpenAIControl(base_url)
        assert control.stats()["behaviour"]["mode"] == "empty"
        assert control.set(mode="ok", reply="remote")["reply"] == "remote"

        outcome = describe(picture, openai_config(base_url))

        assert outcome.output["summary"] == "remote"
        assert control.stats()["requests"] == 1
    finally:
        process.terminate()
        assert process.wait(10) == 0
        if process.stdout is not None:
            process.stdout.close()
