"""Image -> summary stage. Providers sit behind a Protocol; the stage fails open.

`summarize_image` never raises for provider, network or image problems: it returns a
`VisionOutcome` that is either `done` (with a summary) or `degraded` (with a reason).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypedDict

from PIL import Image

from pipelines.errors import ConfigError, MediaError, PermanentError, Stopped, TransientError
from pipelines.imaging import (
    DEFAULT_MAX_PIXELS,
    DecodeLimitExceeded,
    DecompressionBomb,
    ImageError,
    ImageFacts,
    ImageTooLarge,
    PreparedImage,
    blank_check,
    dominant_colours,
    has_alpha,
    load_image,
    prepare_image,
)
from pipelines.outcomes import Outcome
from pipelines.results import StageOutcome, Status

log = logging.getLogger(__name__)
StopAsked = Callable[[], bool]  # has the caller asked the work to stop?

# Bump when code changes what a given config produces (it is part of the processor version).
# 2: the blank/uniform guard scales 16-bit and float images instead of clipping them.
_STAGE_REVISION = 2
LOCAL_MODEL = "local:pillow+rapidocr-onnxruntime-ppocrv4"

DEFAULT_PROMPT = (
    "Describe this image for someone who cannot see it. First say what kind of image it is "
    "(photo, screenshot, chart or graph, document or scan, diagram, illustration, ...). "
    "Then describe the main objects or people, the layout, and the notable colours. "
    "Transcribe ALL visible text verbatim and in reading order, including labels, numbers, "
    "axis titles, table cells and interface text; write [illegible] where text cannot be read. "
    "For a chart, give its type, axes, series and the key values or trend. "
    "Do not guess at what you cannot see. Answer in plain text without a preamble."
)


class ProviderKind(StrEnum):
    OPENAI = "openai"
    LOCAL = "local"
    NONE = "none"


class DegradedReason(StrEnum):
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    CONNECTION_REFUSED = "connection_refused"
    CONNECTION_ERROR = "connection_error"
    INVALID_RESPONSE = "invalid_response"
    EMPTY_RESPONSE = "empty_response"
    RESPONSE_TOO_LARGE = "response_too_large"
    UNREADABLE_IMAGE = "unreadable_image"
    DECOMPRESSION_BOMB = "decompression_bomb"
    DECODE_LIMIT = "decode_limit"
    IMAGE_TOO_LARGE = "image_too_large"
    PROVIDER_ERROR = "provider_error"


@dataclass(frozen=True, slots=True)
class VisionConfig:
    provider: ProviderKind = ProviderKind.LOCAL
    base_url: str | None = None
    api_key: str = field(default="", repr=False)
    model: str = ""
    prompt: str = DEFAULT_PROMPT
    timeout: float = 20.0  # seconds for the whole provider call, retries included
    max_retries: int = 1  # only while the timeout leaves room
    max_side: int = 1568
    max_image_bytes: int = 4 * 1024 * 1024  # of the re-encoded image, before base64
    max_pixels: int = DEFAULT_MAX_PIXELS  # decompression-bomb limit; Pillow's is the ceiling
    min_side: int = 16
    uniform_tolerance: int = 8  # max per-channel spread (0-255) of a "blank" image
    max_output_chars: int = 4000
    max_concurrency: int = 4  # enforced by the workers (Redis semaphore), carried here

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "provider", ProviderKind(self.provider))
        except ValueError:
            raise ConfigError(f"unknown vision provider {self.provider!r}") from None
        positive = ("timeout", "max_side", "max_image_bytes", "max_pixels", "max_output_chars")
        for name in (*positive, "max_concurrency"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"vision {name} must be > 0")
        if self.max_retries < 0 or self.min_side < 1 or not 0 <= self.uniform_tolerance <= 255:
            raise ConfigError("vision max_retries, min_side or uniform_tolerance out of range")
        if self.max_side < self.min_side:
            raise ConfigError("vision max_side must be >= min_side")

    @property
    def effective_model(self) -> str:
        return LOCAL_MODEL if self.provider is ProviderKind.LOCAL else self.model


def processor_version(config: VisionConfig) -> str:
    """Short stable hash of everything that changes the output (never the key or timeout)."""
    shaping = {
        "stage": _STAGE_REVISION,
        "provider": str(config.provider),
        "model": config.effective_model,
        # The local provider ignores the prompt: changing it must not trigger reprocessing.
        "prompt": None if config.provider is ProviderKind.LOCAL else config.prompt,
        "max_side": config.max_side,
        "max_image_bytes": config.max_image_bytes,
        "max_pixels": config.max_pixels,
        "min_side": config.min_side,
        "uniform_tolerance": config.uniform_tolerance,
        "max_output_chars": config.max_output_chars,
    }
    blob = json.dumps(shaping, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


class ProviderError(MediaError):
    """A provider gave no usable answer; `reason` says which way it failed."""

    transient = False
    outcome = Outcome.PROVIDER_REJECTED

    def __init__(self, reason: DegradedReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        if reason is DegradedReason.TIMEOUT:
            self.outcome = Outcome.TIMEOUT


class ProviderUnavailable(ProviderError, TransientError):
    """Timeouts, refused connections, 5xx/429: the same image may work later."""

    transient = True
    outcome = Outcome.PROVIDER_UNAVAILABLE


class ProviderRejected(ProviderError, PermanentError):
    """4xx, refusals, oversize answers: retrying the same request will not help."""


class VisionProvider(Protocol):
    def describe(self, image: PreparedImage, should_stop: StopAsked | None = None) -> str:
        """Text about `image`, within the configured timeout; raise ProviderError otherwise.
        `should_stop`, asked while it waits for an answer: raise `Stopped` when it says so."""
        ...


class TextReader(Protocol):
    def read_lines(self, image: Image.Image) -> list[str]:
        """OCR: the lines of text in `image`, in reading order."""
        ...


class FactsDict(TypedDict):
    width: int
    height: int
    format: str
    mode: str


class VisionOutputDict(TypedDict):
    """The `output` of a vision result, done or degraded."""

    summary: str | None
    reason: str | None
    detail: str | None
    retryable: bool
    facts: FactsDict | None
    provider: str
    model: str
    processor_version: str
    elapsed_ms: int


def summarize_image(
    path: Path,
    config: VisionConfig,
    provider: VisionProvider,
    should_stop: StopAsked | None = None,
) -> StageOutcome:
    """Describe the image at `path`. Fail-open: problems become a `degraded` outcome whose
    reason names the failure (`timeout: provider did not answer`). `should_stop` is asked
    before the provider is called and while it is waited for: `Stopped` ends it, no result."""
    started = time.monotonic()
    facts: ImageFacts | None = None

    def outcome(
        summary: str | None = None,
        reason: DegradedReason | None = None,
        detail: str | None = None,
        retryable: bool = False,
        code: Outcome = Outcome.INTERNAL,
    ) -> StageOutcome:
        shown: FactsDict | None = None
        if facts is not None:
            f = facts
            shown = {"width": f.width, "height": f.height, "format": f.format, "mode": f.mode}
        output: VisionOutputDict = {
            "summary": summary,
            "reason": None if reason is None else str(reason),
            "detail": detail,
            "retryable": retryable,
            "facts": shown,
            "provider": str(config.provider),
            "model": config.effective_model,
            "processor_version": processor_version(config),
            "elapsed_ms": round((time.monotonic() - started) * 1000),
        }
        if reason is None:
            return StageOutcome(Status.DONE, dict(output))
        log.warning("vision degraded for %s: %s: %s", path.name, reason, detail)
        why = f"{reason}: {detail}" if detail else str(reason)
        return StageOutcome(Status.DEGRADED, dict(output), reason=why, outcome=code)

    try:
        loaded = load_image(path, max_side=config.max_side, max_pixels=config.max_pixels)
        facts = loaded.facts
        statement = low_information_statement(loaded.image, facts, config)
        if statement is not None:
            return outcome(summary=statement)
        prepared = prepare_image(
            loaded.image, facts, max_side=config.max_side, max_bytes=config.max_image_bytes
        )
    except DecompressionBomb as exc:
        return outcome(reason=DegradedReason.DECOMPRESSION_BOMB, detail=str(exc), code=exc.outcome)
    except DecodeLimitExceeded as exc:
        return outcome(reason=DegradedReason.DECODE_LIMIT, detail=str(exc), code=exc.outcome)
    except ImageTooLarge as exc:
        return outcome(reason=DegradedReason.IMAGE_TOO_LARGE, detail=str(exc), code=exc.outcome)
    except ImageError as exc:
        return outcome(reason=DegradedReason.UNREADABLE_IMAGE, detail=str(exc), code=exc.outcome)
    except Exception as exc:  # fail-open: Pillow can fail in ways load_image did not see
        log.exception("preparing %s for vision failed", path.name)
        detail = f"unreadable image: {type(exc).__name__}: {exc}"[:300]
        unreadable = Outcome.UNREADABLE_IMAGE
        return outcome(reason=DegradedReason.UNREADABLE_IMAGE, detail=detail, code=unreadable)

    if should_stop is not None and should_stop():
        raise Stopped("stopped before the provider was asked")
    try:
        text = clean_text(provider.describe(prepared, should_stop), config.max_output_chars)
    except Stopped:
        raise
    except ProviderError as exc:
        detail, retryable = exc.message, exc.transient
        return outcome(reason=exc.reason, detail=detail, retryable=retryable, code=exc.outcome)
    except Exception as exc:  # fail-open: a provider bug must not reach the agent
        log.exception("vision provider raised unexpectedly")
        detail = f"{type(exc).__name__}: {exc}"[:300]
        return outcome(reason=DegradedReason.PROVIDER_ERROR, detail=detail, retryable=True)
    if not text:
        detail = "provider answered with no printable text"
        rejected = Outcome.PROVIDER_REJECTED
        return outcome(reason=DegradedReason.EMPTY_RESPONSE, detail=detail, code=rejected)
    return outcome(summary=text)


def low_information_statement(
    image: Image.Image, facts: ImageFacts, config: VisionConfig
) -> str | None:
    """A plain statement for blank or tiny images, which are never sent to a provider."""
    size = f"{facts.width}x{facts.height} pixels"
    blank = blank_check(image, config.uniform_tolerance)
    if blank is not None:
        what = "fully transparent" if blank.transparent else f"colour {blank.colour}"
        return f"Blank or near-uniform image ({size}, {what}); no content to describe."
    if min(facts.width, facts.height) < config.min_side:
        colours = ", ".join(name for name, _ in dominant_colours(image)) or "mixed colours"
        return f"Tiny image ({size}, {colours}); too small to describe."
    return None


# C0/C1 controls except tab and newline, plus bidi overrides that can disguise text.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BLANK_LINES = re.compile(r"\n{3,}")


def clean_text(text: str, max_chars: int) -> str:
    """Strip control characters (keeping newlines and tabs) and cap the length."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _BLANK_LINES.sub("\n\n", _UNSAFE.sub("", text)).strip()
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space > max_chars * 0.8:  # prefer a word boundary when one is near
        cut = cut[:space]
    return cut.rstrip() + "…"


class LocalVisionProvider:
    """No network: Pillow facts plus OCR text. Honest about what it cannot see."""

    def __init__(self, reader: TextReader) -> None:
        self._reader = reader

    def describe(self, image: PreparedImage, should_stop: StopAsked | None = None) -> str:
        # Our own re-encoding (prepare_image): PNG or JPEG and nothing else.
        with Image.open(io.BytesIO(image.data), formats=["PNG", "JPEG"]) as opened:
            pixels = opened.convert("RGBA" if has_alpha(opened) else "RGB")
        src = image.source
        parts = [f"{src.format} image, {src.width}x{src.height}"]
        colours = dominant_colours(pixels)
        if colours:
            main, *rest = (name for name, _ in colours)
            parts.append(f"mostly {main}" + (f" with {' and '.join(rest)}" if rest else ""))
        if has_alpha(pixels) and pixels.getchannel("A").getextrema()[0] < 255:  # type: ignore[operator]
            parts.append("partly transparent")
        if should_stop is not None and should_stop():  # before the OCR, the long part
            raise Stopped("stopped before reading the text")
        lines = [line.strip() for line in self._reader.read_lines(pixels) if line.strip()]
        head = ", ".join(parts)
        if not lines:
            return f"{head}; no text found (OCR)."
        return f"{head}; text (OCR):\n" + "\n".join(lines)
