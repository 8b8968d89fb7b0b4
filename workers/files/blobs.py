"""The blob store port: where every node finds the bytes a job names.

A message names its input by content (`BlobRef`: sha256, kind, suffix, size), never by a
path. On one machine the blob store is the local cache itself (`LocalBlobs`); on many it is
an S3 bucket (`workers.files.s3.S3Blobs`) under `blobs/sha256/<aa>/<sha256>`, written once, and
each node keeps its own copies in its cache (`workers.files.node_cache`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipelines.cache import MediaCache
from pipelines.errors import PermanentError
from pipelines.media import MediaKind
from pipelines.outcomes import Outcome

_HEX = frozenset("0123456789abcdef")
_EXT = re.compile(r"\.[a-z0-9]{1,8}|")
# A document this small travels in the message as text (a speech request): no store trip.
INLINE_MAX_BYTES = 256 * 1024
READ_CHUNK = 1 << 20


class BlobMissing(PermanentError):
    """The blob a job names is in neither this node's cache nor the blob store."""

    outcome = Outcome.INPUT_MISSING


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


@dataclass(frozen=True, slots=True)
class Listed:
    """One stored input, as a listing of the blob store gives it."""

    ref: BlobRef
    modified: float  # unix time it was stored
    path: Path | None = None  # where it lies on this node, when it does

    @property
    def sha256(self) -> str:
        return self.ref.sha256

    @property
    def kind(self) -> MediaKind:
        return self.ref.kind


class BlobStore(Protocol):
    """Blobs by sha256, written once, readable by every node."""

    remote: bool  # False: the local cache is the store (one machine)

    def describe(self) -> str: ...

    def check(self) -> None:
        """Raise `ConfigError` with one line when the store cannot be used (missing bucket,
        wrong credentials, unreachable endpoint): at start, not as a failed job later."""
        ...

    def has(self, ref: BlobRef) -> bool: ...

    def put(
        self, ref: BlobRef, source: Path, mime: str | None = None, output: bool = False
    ) -> bool:
        """Write once; a blob already stored is left as it is (False). `output`: our own
        product."""
        ...

    def chunks(self, ref: BlobRef) -> Iterator[bytes]:
        """The blob's bytes, streamed; raises `BlobMissing` when it is not stored."""
        ...

    def inputs(self, kind: MediaKind) -> Iterator[Listed]:
        """Every stored blob of a kind that is an input (not our own output)."""
        ...

    def close(self) -> None: ...


class LocalBlobs:
    """One machine: the local cache is the blob store; nothing is copied anywhere."""

    remote = False

    def __init__(self, cache: MediaCache) -> None:
        self.cache = cache

    def describe(self) -> str:
        return f"the local cache {self.cache.root}"

    def check(self) -> None:
        return None

    def _path(self, ref: BlobRef) -> Path | None:
        if ref.kind is MediaKind.DOCUMENT:
            found = self.cache.find_document(ref.sha256)
        else:
            found = self.cache.find(ref.sha256)
        return found.path if found is not None else None

    def has(self, ref: BlobRef) -> bool:
        return self._path(ref) is not None

    def put(
        self, ref: BlobRef, source: Path, mime: str | None = None, output: bool = False
    ) -> bool:
        return False  # it is in the cache already: that is where `source` lies

    def chunks(self, ref: BlobRef) -> Iterator[bytes]:
        path = self._path(ref)
        if path is None:
            raise BlobMissing(f"blob {ref.sha256} is not in {self.describe()}")
        with path.open("rb") as handle:
            yield from iter(lambda: handle.read(READ_CHUNK), b"")

    def inputs(self, kind: MediaKind) -> Iterator[Listed]:
        for item in self.cache.iter_inputs(kind):
            ref = BlobRef(item.sha256, kind, item.path.suffix.lower(), item.size)
            yield Listed(ref, item.mtime, item.path)

    def close(self) -> None:
        return None
