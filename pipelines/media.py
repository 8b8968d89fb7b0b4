"""Value types shared by the stages: media kinds, stored blobs, markers (and `BlobError`, a
blob that could not be cached, with its marker), job requests."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pipelines.errors import PermanentError
from pipelines.outcomes import Outcome


class MediaKind(StrEnum):
    IMAGE = "image"
    AUDIO = "audio"
    DOCUMENT = "document"


class MarkerReason(StrEnum):
    TOO_LARGE = "too_large"
    BAD_BASE64 = "bad_base64"
    NOT_IMAGE = "not_image"
    NOT_AUDIO = "not_audio"
    UNSUPPORTED_BLOCK = "unsupported_block"
    CACHE_ERROR = "cache_error"


_BLOB_OUTCOMES = {
    MarkerReason.NOT_AUDIO: Outcome.NOT_AUDIO,
    MarkerReason.NOT_IMAGE: Outcome.UNREADABLE_IMAGE,
    MarkerReason.CACHE_ERROR: Outcome.INTERNAL,  # a full disk is told by its errno first
}


class BlobError(PermanentError):
    """One blob could not be cached; `reason` is the marker the agent sees."""

    def __init__(self, reason: MarkerReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.outcome = _BLOB_OUTCOMES.get(reason, Outcome.INVALID_INPUT)


class Capability(StrEnum):
    VISION_SUMMARIZE = "vision.summarize"
    AUDIO_TRANSCRIBE = "audio.transcribe"
    AUDIO_SYNTHESIZE = "audio.synthesize"
    DOCUMENT_DIGEST = "document.digest"


@dataclass(frozen=True, slots=True)
class StoredBlob:
    """A blob that is now in the cache, named by the sha256 of its bytes."""

    kind: MediaKind
    path: Path
    mime: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Marker:
    """Why one block could not be turned into media; rendered for the agent."""

    block: int
    reason: MarkerReason
    message: str


@dataclass(frozen=True, slots=True)
class JobRequest:
    capability: Capability
    sha256: str
    path: Path
