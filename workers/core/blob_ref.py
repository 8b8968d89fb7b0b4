"""A blob named by its content (`BlobRef`): what a job message carries instead of a path,
and what a door may hand the gateway for an input it already knows the store holds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.errors import PermanentError
from pipelines.media import MediaKind

_HEX = frozenset("0123456789abcdef")
_EXT = re.compile(r"\.[a-z0-9]{1,8}|")
# A document this small travels in the message as text (a speech request): no store trip.
INLINE_MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A blob named by its content: what a message carries instead of a path."""

    sha256: str
    kind: MediaKind
    ext: str  # the suffix its producer's cache gave it (".png", ".ogg", ".json")
    size: int
    text: str | None = None  # the bytes themselves, for a small UTF-8 document

    def __post_init__(self) -> None:
        if len(self.sha256) != 64 or not set(self.sha256) <= _HEX:
            raise PermanentError(f"not a sha256 hex digest: {self.sha256[:80]!r}")
        if not _EXT.fullmatch(self.ext):
            raise PermanentError(f"not a file suffix: {self.ext[:40]!r}")
        if self.size < 0:
            raise PermanentError(f"a blob size cannot be negative: {self.size}")

    @property
    def key(self) -> str:
        """Its object key below the store's prefix."""
        return f"blobs/sha256/{self.sha256[:2]}/{self.sha256}"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "sha256": self.sha256,
            "kind": self.kind.value,
            "ext": self.ext,
            "size": self.size,
        }
        if self.text is not None:
            found["text"] = self.text
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BlobRef:
        """A reference checked field by field (whoever can publish on a queue writes it)."""
        try:
            kind = MediaKind(data["kind"])
            sha256, ext, size = data["sha256"], data["ext"], data["size"]
        except (KeyError, ValueError, TypeError) as exc:
            raise PermanentError(f"not a blob reference: {str(dict(data))[:200]}") from exc
        text = data.get("text")
        if not isinstance(sha256, str) or not isinstance(ext, str) or type(size) is not int:
            raise PermanentError(f"not a blob reference: {str(dict(data))[:200]}")
        if text is not None and not isinstance(text, str):
            raise PermanentError("a blob reference's text must be a string")
        return cls(sha256, kind, ext, size, text)

    @classmethod
    def of(cls, kind: MediaKind, path: Path, sha256: str, inline: bool = False) -> BlobRef:
        """The reference of a blob in this node's cache; `inline` carries a small document's
        text in the message itself."""
        size = path.stat().st_size
        text = None
        if inline and kind is MediaKind.DOCUMENT and size <= INLINE_MAX_BYTES:
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                text = None
        return cls(sha256, kind, path.suffix.lower(), size, text)
