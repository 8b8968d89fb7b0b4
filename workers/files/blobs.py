"""The blob store port: where every node finds the bytes a job names.

A message names its input by content (`BlobRef`: sha256, kind, suffix, size), never by a
path. On one machine the blob store is the local cache itself (`LocalBlobs`); on many it is
an S3 bucket (`workers.files.s3.S3Blobs`) under `blobs/sha256/<aa>/<sha256>`, written once, and
each node keeps its own copies in its cache (`workers.files.node_cache`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipelines.cache import MediaCache
from pipelines.errors import PermanentError
from pipelines.media import MediaKind
from pipelines.outcomes import Outcome
from workers.core.blob_ref import INLINE_MAX_BYTES, BlobRef

__all__ = ["INLINE_MAX_BYTES", "BlobMissing", "BlobRef", "BlobStore", "Listed", "LocalBlobs"]

READ_CHUNK = 1 << 20


class BlobMissing(PermanentError):
    """The blob a job names is in neither this node's cache nor the blob store."""

    outcome = Outcome.INPUT_MISSING


@dataclass(frozen=True, slots=True)
class Listed:
    """One stored input, as the store's index lists it (`workers.files.store_index`)."""

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

    def close(self) -> None:
        return None
