"""Job results keyed by (capability, processor version, sha256).

Sidecar JSON files under `<home>/results/` are the source of truth; a Redis index (in the
workers layer) only makes them fast to find and can be rebuilt from them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypedDict

from pipelines.media import Capability
from pipelines.outcomes import Outcome

_HEX = frozenset("0123456789abcdef")
# The `note` of a transcript in which nobody speaks (silence, hiss, a pure tone): its `text`
# is empty on purpose, and the note says so instead of nothing.
NO_SPEECH_NOTE = "no speech detected"


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DEGRADED = "degraded"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (Status.DONE, Status.DEGRADED, Status.FAILED)


class MetaJson(TypedDict):
    job_id: str | None
    worker: str | None
    attempts: int
    elapsed_ms: int
    reason: str | None
    outcome: str | None  # the `Outcome` of a result that is not done
    trace_id: str | None
    started_at: float | None


class EnvelopeJson(TypedDict):
    status: str
    capability: str
    sha256: str
    processor_version: str
    output: dict[str, Any]
    meta: MetaJson


@dataclass(frozen=True, slots=True)
class ResultKey:
    capability: Capability
    version: str
    sha256: str

    def __post_init__(self) -> None:
        if len(self.sha256) != 64 or not set(self.sha256) <= _HEX:
            raise ValueError(f"not a sha256 hex digest: {self.sha256[:80]!r}")
        if not self.version or not set(self.version) <= _HEX:
            raise ValueError(f"not a processor version: {self.version[:80]!r}")

    def __str__(self) -> str:
        return f"{self.capability.value}:{self.version}:{self.sha256}"

    @classmethod
    def parse(cls, text: str) -> ResultKey:
        capability, version, sha256 = text.split(":")
        return cls(Capability(capability), version, sha256)


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """What one stage returns: done with output, or degraded/failed with a reason (for
    people) and its code (for the doors)."""

    status: Status
    output: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None
    outcome: Outcome | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    """The one result shape every capability shares."""

    status: Status
    key: ResultKey
    output: Mapping[str, Any]
    job_id: str | None = None
    worker: str | None = None
    attempts: int = 1
    elapsed_ms: int = 0
    reason: str | None = None
    trace_id: str | None = None
    started_at: float | None = None  # unix time the stage started
    outcome: Outcome | None = None  # why it is not done (None while it is, or runs)

    def to_json(self) -> EnvelopeJson:
        return {
            "status": self.status.value,
            "capability": self.key.capability.value,
            "sha256": self.key.sha256,
            "processor_version": self.key.version,
            "output": dict(self.output),
            "meta": {
                "job_id": self.job_id,
                "worker": self.worker,
                "attempts": self.attempts,
                "elapsed_ms": self.elapsed_ms,
                "reason": self.reason,
                "outcome": None if self.outcome is None else self.outcome.value,
                "trace_id": self.trace_id,
                "started_at": self.started_at,
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Envelope:
        meta = data.get("meta") or {}
        status = Status(data["status"])
        reason = meta.get("reason")
        return cls(
            status=status,
            key=ResultKey(
                Capability(data["capability"]), data["processor_version"], data["sha256"]
            ),
            output=data.get("output") or {},
            job_id=meta.get("job_id"),
            worker=meta.get("worker"),
            attempts=int(meta.get("attempts", 1)),
            elapsed_ms=int(meta.get("elapsed_ms", 0)),
            reason=reason,
            trace_id=meta.get("trace_id"),
            started_at=meta.get("started_at"),
            outcome=Outcome.read(meta.get("outcome")) or legacy_outcome(status, reason),
        )


# How the previous version spelled each outcome at the head of a reason: the name of the
# exception the stage raised, or a word of its own. Read once, by `legacy_outcome`.
_LEGACY_HEADS: tuple[tuple[str, Outcome], ...] = (
    ("disk_full:", Outcome.DISK_FULL),
    ("skipped:", Outcome.SKIPPED),
    ("cancelled", Outcome.CANCELLED),
    ("processor version mismatch", Outcome.VERSION_MISMATCH),
    ("dead-lettered", Outcome.DEAD_LETTERED),
    ("gave up after", Outcome.RETRIES_EXHAUSTED),
    ("malformed message", Outcome.MALFORMED_JOB),
    ("provider_busy", Outcome.PROVIDER_BUSY),
    ("NotAudioError", Outcome.NOT_AUDIO),
    ("AudioDecodeError", Outcome.UNREADABLE_AUDIO),
    ("AudioDecodeTimeoutError", Outcome.UNREADABLE_AUDIO),
    ("AudioLimitError", Outcome.UNREADABLE_AUDIO),
    ("EmptyAudioError", Outcome.EMPTY_AUDIO),
    ("AudioTooLargeError", Outcome.AUDIO_TOO_LARGE),
    ("AudioTooLongError", Outcome.AUDIO_TOO_LONG),
    ("EmptyTextError", Outcome.EMPTY_TEXT),
    ("TextTooLongError", Outcome.TEXT_TOO_LONG),
    ("ConfigError", Outcome.BAD_CONFIGURATION),
    ("VoiceError", Outcome.UNSUPPORTED),
    ("SynthesisError", Outcome.ENGINE_FAILED),
    ("AudioEncodeError", Outcome.ENGINE_FAILED),
    ("BlobMissing", Outcome.INPUT_MISSING),
    ("PermanentError", Outcome.INVALID_INPUT),
    # A degraded image summary's reason starts with the vision stage's own reason.
    ("timeout", Outcome.TIMEOUT),
    ("http_error", Outcome.PROVIDER_UNAVAILABLE),
    ("connection_refused", Outcome.PROVIDER_UNAVAILABLE),
    ("connection_error", Outcome.PROVIDER_UNAVAILABLE),
    ("invalid_response", Outcome.PROVIDER_UNAVAILABLE),
    ("provider_error", Outcome.PROVIDER_UNAVAILABLE),
    ("empty_response", Outcome.PROVIDER_REJECTED),
    ("response_too_large", Outcome.PROVIDER_REJECTED),
    ("unreadable_image", Outcome.UNREADABLE_IMAGE),
    ("decompression_bomb", Outcome.IMAGE_TOO_LARGE),
    ("decode_limit", Outcome.IMAGE_TOO_LARGE),
    ("image_too_large", Outcome.IMAGE_TOO_LARGE),
)
# A full disk under whatever error wrapped it, in the OS's words.
_LEGACY_DISK_FULL = ("No space left on device", "Disk quota exceeded", "[Errno 28]", "[Errno 122]")


def legacy_outcome(status: Status, reason: str | None) -> Outcome | None:
    """The code of a result stored by the previous version, which wrote only a reason: the
    one place that reads reason text. None for a result that is done or not finished."""
    if not status.finished or status is Status.DONE:
        return None
    text = reason or ""
    if any(words in text for words in _LEGACY_DISK_FULL):
        return Outcome.DISK_FULL
    return next((code for head, code in _LEGACY_HEADS if text.startswith(head)), Outcome.INTERNAL)


def processor_version(*parts: object) -> str:
    """A short stable hash of everything that changes a capability's output."""
    text = json.dumps([str(p) for p in parts], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def private_folders(root: Path, folder: Path) -> None:
    """mkdir -p where every created level is 0700 (`parents=True` ignores the mode)."""
    for level in [*reversed(folder.relative_to(root).parents), folder.relative_to(root)]:
        (root / level).mkdir(mode=0o700, parents=level == Path("."), exist_ok=True)


class ResultFiles(Protocol):
    """Where finished results are kept for good, one per key (the truth an index rebuilds
    from): files in the home (`Sidecars`) or objects in a bucket shared by many nodes."""

    def read(self, key: ResultKey) -> Envelope | None: ...
    def write(self, envelope: Envelope) -> object: ...
    def replace(self, envelope: Envelope) -> Status | None:
        """`write`, answering the status of the result it replaced (None: the key had
        none): where the key stood, from the truth, when its index entry has expired."""
        ...

    def scan(self) -> Iterator[Envelope]: ...
    def scan_capability(self, capability: Capability) -> Iterator[Envelope]: ...


class Sidecars:
    """Finished results as JSON files: `<root>/<capability>/<version>/<sha256>.json`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: ResultKey) -> Path:
        return self.root / key.capability.value / key.version / f"{key.sha256}.json"

    def read(self, key: ResultKey) -> Envelope | None:
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        try:
            return Envelope.from_json(data)
        except (KeyError, ValueError, TypeError):
            return None

    def write(self, envelope: Envelope) -> Path:
        target = self.path(envelope.key)
        private_folders(self.root, target.parent)
        tmp = target.parent / f".tmp-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(envelope.to_json(), out, ensure_ascii=False)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return target

    def replace(self, envelope: Envelope) -> Status | None:
        before = self.read(envelope.key)
        self.write(envelope)
        return before.status if before is not None else None

    def scan(self) -> Iterator[Envelope]:
        """Every readable sidecar, for rebuilding an index or counting."""
        return self._scan("*")

    def scan_capability(self, capability: Capability) -> Iterator[Envelope]:
        """Every readable sidecar of one capability, whatever its processor version."""
        return self._scan(capability.value)

    def _scan(self, folder: str) -> Iterator[Envelope]:
        if not self.root.is_dir():
            return
        for path in self.root.glob(f"{folder}/*/*.json"):
            try:
                yield Envelope.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
