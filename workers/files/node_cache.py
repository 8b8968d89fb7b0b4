"""This node's copies of blobs: the local cache first, else the blob store, hash checked.

A worker on a shared-nothing node fetches what jobs name and uploads what it makes; those
copies are replicas (the bucket has them) and are kept within a size budget, least recently
used first out. Whatever a producer materialises for its agent (a `MEDIA:` path) is never
pruned: only replicas are.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from pathlib import Path

from pipelines.cache import MediaCache
from pipelines.errors import PermanentError
from pipelines.media import MediaKind
from workers.files.blobs import READ_CHUNK, BlobMissing, BlobRef, BlobStore

log = logging.getLogger(__name__)

REPLICAS = "replicas"  # one empty file per sha256 whose copy here the bucket also holds
PRUNE_GRACE = 600.0  # a replica used this recently is never pruned (a job may be reading it)
PRUNE_EVERY = 0.05  # of the budget fetched since the last look at the cache's size


class NodeCache:
    def __init__(
        self, cache: MediaCache, blobs: BlobStore, budget_bytes: int, replicas: bool = False
    ) -> None:
        self.cache = cache
        self.blobs = blobs
        self.budget = budget_bytes
        self.replicas = replicas and blobs.remote  # this node's copies may be pruned
        self._since_prune = 0

    def find(self, ref: BlobRef) -> Path | None:
        """The cached file with the ref's kind and content hash, checked byte for byte."""
        if ref.kind is MediaKind.DOCUMENT:
            found = self.cache.find_document(ref.sha256)
        else:
            found = self.cache.find(ref.sha256)
        if found is None or found.kind is not ref.kind:
            return None
        if _sha256(found.path) != ref.sha256:
            log.warning("cached %s does not match its name; fetching it again", found.path)
            with contextlib.suppress(FileNotFoundError):
                found.path.unlink()  # else a copy of the same size would be kept
            return None
        with contextlib.suppress(OSError):
            os.utime(found.path)  # least recently used is what prune drops first
        return found.path

    def local(self, ref: BlobRef) -> Path:
        """A local path holding the ref's bytes: cached, carried in the ref, or fetched."""
        path = self.find(ref)
        if path is not None:
            return path
        if ref.text is not None:
            return self.cache.adopt(
                iter([ref.text.encode("utf-8")]), ref.kind, ref.sha256, ext=ref.ext
            ).path
        if not self.blobs.remote:
            raise BlobMissing(f"blob {ref.sha256} ({ref.kind}) is not in {self.blobs.describe()}")
        # A replica needs no fsync: it is checked on every use and fetched again if torn.
        stored = self.cache.adopt(
            self.blobs.chunks(ref), ref.kind, ref.sha256, ext=ref.ext, sync=not self.replicas
        )
        if self.replicas:
            self._mark_replica(ref.sha256)
            self._since_prune += stored.size
            if self._since_prune >= self.budget * PRUNE_EVERY:
                self.prune()
        return stored.path

    def publish(self, ref: BlobRef, path: Path, mime: str | None = None) -> None:
        """Put our own output where every node reads it (nothing to do on one machine)."""
        if not self.blobs.remote:
            return
        self.blobs.put(ref, path, mime, output=True)
        if self.replicas:
            self._mark_replica(ref.sha256)

    def shared_bytes(self, ref: BlobRef, limit: int) -> bytes | None:
        """The bytes of a blob another node published, read from the shared store (not
        kept in this cache), at most `limit` of them and checked against the ref; None
        when there is no shared store, or it is not there, larger or torn."""
        if not self.blobs.remote or ref.size > limit:
            return None
        read = bytearray()
        try:
            for chunk in self.blobs.chunks(ref):
                read += chunk
                if len(read) > limit:
                    return None
        except Exception as exc:  # lost, or the store is down: the caller does without
            log.warning("blob %s not read from %s: %s", ref.sha256[:16], self.blobs.describe(), exc)
            return None
        if hashlib.sha256(read).hexdigest() != ref.sha256:
            log.warning("blob %s arrived with other bytes: not used", ref.sha256[:16])
            return None
        return bytes(read)

    def _mark_replica(self, sha256: str) -> None:
        folder = self.cache.root / REPLICAS
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder / sha256, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.close(fd)

    def prune(self) -> int:
        """Drop the least recently used replicas until the cache is within its budget;
        returns the bytes freed. Files that are not replicas are never touched."""
        self._since_prune = 0
        if not self.replicas:
            return 0
        files: list[tuple[float, int, Path, str]] = []
        total = 0
        for kind in (MediaKind.IMAGE, MediaKind.AUDIO):
            for item in self.cache.iter_stored(kind):
                total += item.size
                files.append((item.mtime, item.size, item.path, item.sha256))
        if total <= self.budget:
            return 0
        freed = 0
        now = time.time()
        marks = self.cache.root / REPLICAS
        for mtime, size, path, sha256 in sorted(files):
            if total - freed <= self.budget * 0.9:
                break
            if now - mtime < PRUNE_GRACE or not (marks / sha256).exists():
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                freed += size
            (marks / sha256).unlink(missing_ok=True)
        if freed:
            log.info("pruned %d bytes of fetched blobs (budget %d bytes)", freed, self.budget)
        return freed


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def input_ref(kind: MediaKind, path: Path, sha256: str) -> BlobRef:
    """The reference a message carries for a blob in the producer's cache."""
    try:
        return BlobRef.of(kind, path, sha256, inline=kind is MediaKind.DOCUMENT)
    except OSError as exc:
        raise PermanentError(f"job input {path} cannot be read: {exc.strerror}") from exc
