"""MediaCache: content-addressed storage for decoded MCP blobs.

Every blob is decoded from base64 in bounded chunks, hashed as it goes, written to a temp
file in its destination folder, fsynced and renamed. Its name is the sha256 of its bytes,
so the same bytes arriving twice are one file. Nothing is ever written outside the root.
Bytes a caller's validator already accepted (`pipelines.proven`), whose file is here, are
hashed and nothing more: no temp file, no fsync, no second check.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pipelines.base64_stream import decoded_size_bound, iter_base64
from pipelines.media import BlobError, MarkerReason, MediaKind, StoredBlob
from pipelines.names import safe_document_name
from pipelines.proven import BUFFER_BYTES, Held, ProvenFormats, hold
from pipelines.sniff import HEAD_BYTES, Format, looks_like_markup, sniff_audio, sniff_image

DEFAULT_MAX_BLOB_BYTES = 50 * 1024 * 1024
_FOLDERS = {MediaKind.IMAGE: "images", MediaKind.AUDIO: "audio", MediaKind.DOCUMENT: "documents"}
OUTPUTS = "outputs"  # one empty file per sha256 of a blob we produced (see mark_output)


@dataclass(frozen=True, slots=True)
class CacheLimits:
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES


# A validator looks at a fully written temp file and returns its real format, or raises
# BlobError. Images are checked with Pillow, which lives in pipelines.imaging.
Validator = Callable[[Path, bytes], Format]


@dataclass(frozen=True, slots=True)
class CachedFile:
    kind: MediaKind
    path: Path
    sha256: str
    size: int
    mtime: float


_HEX = frozenset("0123456789abcdef")
_EXT = re.compile(r"\.[a-z0-9]{1,8}|")


class MediaCache:
    """Content-addressed cache rooted at `root` (folders 0700, files 0600)."""

    def __init__(self, root: Path, limits: CacheLimits | None = None) -> None:
        self.root = Path(os.path.abspath(root))
        self.limits = limits or CacheLimits()

    def folder(self, kind: MediaKind) -> Path:
        return self.root / _FOLDERS[kind]

    def store_base64(
        self,
        data: str,
        kind: MediaKind,
        *,
        mime: str | None = None,
        uri: str | None = None,
        name: str | None = None,
        validate: Validator | None = None,
        proven: ProvenFormats | None = None,
    ) -> StoredBlob:
        """Decode and store one base64 blob; raises BlobError with the marker reason.

        `proven` remembers what `validate` accepted: a blob it holds whose file is already
        here is returned as it is (see `pipelines.proven`)."""
        limit = self.limits.max_blob_bytes
        bound = decoded_size_bound(data, limit)
        if bound > limit:
            raise BlobError(
                MarkerReason.TOO_LARGE,
                f"too large: about {bound} bytes decoded, limit {limit} bytes",
            )
        return self._store_chunks(
            iter_base64(data),
            kind,
            mime=mime,
            uri=uri,
            name=name,
            validate=validate,
            proven=proven,
        )

    def find_proven(
        self, data: str, kind: MediaKind, proven: ProvenFormats, within: int
    ) -> StoredBlob | None:
        """The stored blob of base64 `data` when `proven` holds its bytes and their file is
        already here; None when it is not (or decodes to more than `within` bytes): nothing
        is written, synced or decoded beyond the base64, so a caller may check on its event
        loop and hand only the rest (`store_base64`) to a thread."""
        within = min(within, self.limits.max_blob_bytes)
        if decoded_size_bound(data, within) > within:
            return None
        try:
            _chunks, held = hold(iter_base64(data), within)
            known = proven.get(held.sha256) if held is not None else None
            if held is None or known is None:
                return None
            folder = self._ensure_folder(self.folder(kind))  # the same checks as a store
        except BlobError:  # not base64, a folder in doubt: store_base64 says what is wrong
            return None
        return self._already(folder / f"{held.sha256}{known.ext}", held, kind, known)

    def store_bytes(
        self,
        data: bytes,
        kind: MediaKind,
        *,
        mime: str | None = None,
        uri: str | None = None,
        name: str | None = None,
        validate: Validator | None = None,
    ) -> StoredBlob:
        """Store bytes already in memory (text resources, generated audio)."""
        if len(data) > self.limits.max_blob_bytes:
            raise BlobError(
                MarkerReason.TOO_LARGE,
                f"too large: {len(data)} bytes, limit {self.limits.max_blob_bytes} bytes",
            )
        return self._store_chunks(
            iter([data]), kind, mime=mime, uri=uri, name=name, validate=validate
        )

    def store_file(
        self,
        source: Path,
        kind: MediaKind,
        *,
        mime: str | None = None,
        name: str | None = None,
        validate: Validator | None = None,
    ) -> StoredBlob:
        """Copy a local file into the cache, streamed, under the same limits."""
        try:
            handle = source.open("rb")
        except OSError as exc:
            raise BlobError(
                MarkerReason.CACHE_ERROR, f"cannot read {source}: {exc.strerror}"
            ) from exc
        with handle:
            chunks = iter(lambda: handle.read(1024 * 1024), b"")
            return self._store_chunks(
                chunks, kind, mime=mime, uri=None, name=name or source.name, validate=validate
            )

    def adopt(
        self,
        chunks: Iterator[bytes],
        kind: MediaKind,
        sha256: str,
        *,
        ext: str,
        mime: str | None = None,
        sync: bool = True,
    ) -> StoredBlob:
        """Store bytes fetched from elsewhere (another node's blob store) that must hash to
        `sha256`: a mismatch is refused before anything is published. The name keeps `ext`
        (the producer sniffed the bytes that hash to it); `ext` must be a plain suffix.
        `sync=False` skips the fsync of a copy that is checked on every use and can be
        fetched again."""
        if len(sha256) != 64 or not set(sha256) <= _HEX:
            raise BlobError(MarkerReason.CACHE_ERROR, f"not a sha256: {sha256[:80]!r}")
        if not _EXT.fullmatch(ext):
            raise BlobError(MarkerReason.CACHE_ERROR, f"not a file suffix: {ext[:40]!r}")
        fmt = Format(ext.lstrip(".") or "bin", ext, safe_mime(mime))

        def expected(_tmp: Path, _head: bytes) -> Format:
            return fmt

        return self._store_chunks(
            chunks,
            kind,
            mime=fmt.mime,
            uri=None,
            name=f"blob{ext}",
            validate=expected,
            sha256=sha256,
            sync=sync,
        )

    def find(self, sha256: str) -> CachedFile | None:
        """The cached image or audio file with this content hash, from the disk."""
        if len(sha256) != 64 or not set(sha256) <= _HEX:
            return None
        for kind in (MediaKind.IMAGE, MediaKind.AUDIO):
            for path in self.folder(kind).glob(f"{sha256}.*"):
                st = path.lstat()
                if path.is_file() and not path.is_symlink():
                    return CachedFile(kind, path, sha256, st.st_size, st.st_mtime)
        return None

    def find_document(self, sha256: str) -> CachedFile | None:
        """The cached document with this content hash: documents keep their own (safe) name
        under a folder named by the hash prefix, so each file there is hashed to be sure."""
        if len(sha256) != 64 or not set(sha256) <= _HEX:
            return None
        folder = self.folder(MediaKind.DOCUMENT) / sha256[:16]
        if folder.is_symlink() or not folder.is_dir():
            return None
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            st = path.lstat()
            if st.st_size > self.limits.max_blob_bytes or file_sha256(path) != sha256:
                continue
            return CachedFile(MediaKind.DOCUMENT, path, sha256, st.st_size, st.st_mtime)
        return None

    def mark_output(self, sha256: str) -> None:
        """Record that this blob is our own output (a spoken reply), not an input a tool
        returned or a user uploaded: reprocessing walks inputs only."""
        folder = self._ensure_folder(self.root / OUTPUTS)
        marker = folder / sha256
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise BlobError(MarkerReason.CACHE_ERROR, f"cache error: {exc.strerror}") from exc
        os.close(fd)

    def is_output(self, sha256: str) -> bool:
        return os.path.lexists(self.root / OUTPUTS / sha256)

    def iter_inputs(self, kind: MediaKind) -> Iterator[CachedFile]:
        """`iter_stored` without our own outputs: what tools returned or users uploaded."""
        return (item for item in self.iter_stored(kind) if not self.is_output(item.sha256))

    def iter_stored(self, kind: MediaKind) -> Iterator[CachedFile]:
        """Content-addressed files of one kind, from the disk (not from any index)."""
        if kind is MediaKind.DOCUMENT:
            raise ValueError("documents are named by their hash prefix, not iterated here")
        folder = self.folder(kind)
        try:
            entries = os.scandir(folder)
        except FileNotFoundError:
            return
        with entries:
            for entry in entries:
                sha256, dot, _ext = entry.name.partition(".")
                if not dot or len(sha256) != 64 or not set(sha256) <= _HEX:
                    continue  # temp files and anything we did not write
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                yield CachedFile(kind, Path(entry.path), sha256, st.st_size, st.st_mtime)

    def _store_chunks(
        self,
        chunks: Iterator[bytes],
        kind: MediaKind,
        *,
        mime: str | None,
        uri: str | None,
        name: str | None,
        validate: Validator | None,
        sha256: str | None = None,
        sync: bool = True,
        proven: ProvenFormats | None = None,
    ) -> StoredBlob:
        folder = self._ensure_folder(self.folder(kind))
        held = None
        if kind is MediaKind.DOCUMENT:
            proven = None  # documents keep their own names: nothing to look up by hash
        if proven is not None:
            chunks, held = hold(chunks, min(BUFFER_BYTES, self.limits.max_blob_bytes))
            known = proven.get(held.sha256) if held is not None else None
            if held is not None and known is not None:
                found = self._already(folder / f"{held.sha256}{known.ext}", held, kind, known)
                if found is not None:
                    return found
                validate = _proved(known)  # the same bytes: no need to decode them again
        tmp = folder / f".tmp-{secrets.token_hex(8)}"
        try:
            digest, size, head = self._write_temp(
                tmp, chunks, sync, held.sha256 if held is not None else None
            )
            if sha256 is not None and digest != sha256:
                raise BlobError(
                    MarkerReason.CACHE_ERROR,
                    f"blob {sha256[:16]}... arrived with other bytes (sha256 {digest[:16]}...)",
                )
            fmt = validate(tmp, head) if validate is not None else None
            if kind is MediaKind.DOCUMENT:
                target_dir = self._ensure_folder(folder / digest[:16])
                target = target_dir / safe_document_name(uri, name, mime)
                stored_mime = safe_mime(mime)
            else:
                if fmt is None:
                    fmt = _require_format(kind, head)
                target = folder / f"{digest}{fmt.ext}"
                stored_mime = fmt.mime
            self._check_inside(target)
            self._publish(tmp, target, size)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        if proven is not None and fmt is not None:
            proven.add(digest, fmt)
        return StoredBlob(kind=kind, path=target, mime=stored_mime, size=size, sha256=digest)

    def _write_temp(
        self, tmp: Path, chunks: Iterator[bytes], sync: bool = True, digest: str | None = None
    ) -> tuple[str, int, bytes]:
        """Write, hash (unless the `digest` is known) and sync the chunks to `tmp`."""
        limit = self.limits.max_blob_bytes
        hasher = hashlib.sha256() if digest is None else None
        size = 0
        head = b""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(tmp, flags, 0o600)
        except OSError as exc:
            raise BlobError(MarkerReason.CACHE_ERROR, f"cache error: {exc.strerror}") from exc
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise BlobError(
                        MarkerReason.TOO_LARGE,
                        f"too large: more than {limit} bytes after decoding",
                    )
                if len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                if hasher is not None:
                    hasher.update(chunk)
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise BlobError(
                        MarkerReason.CACHE_ERROR, f"cache error while writing: {exc.strerror}"
                    ) from exc
            try:
                out.flush()
                if sync:
                    os.fsync(out.fileno())
            except OSError as exc:
                raise BlobError(
                    MarkerReason.CACHE_ERROR, f"cache error while syncing: {exc.strerror}"
                ) from exc
        return (hasher.hexdigest() if hasher is not None else str(digest)), size, head

    def _holds(self, target: Path, size: int) -> bool:
        """A regular file (not a link) of this size: content-addressed, the same bytes."""
        try:
            st = target.lstat()
        except FileNotFoundError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size == size

    def _already(self, target: Path, held: Held, kind: MediaKind, fmt: Format) -> StoredBlob | None:
        """The stored blob when its proved file is already here (any doubt: None, write it)."""
        try:
            here = self._holds(target, held.size)
        except OSError:
            here = False
        return StoredBlob(kind, target, fmt.mime, held.size, held.sha256) if here else None

    def _publish(self, tmp: Path, target: Path, size: int) -> None:
        if self._holds(target, size):
            tmp.unlink()  # same name, same size, content-addressed: same bytes
            return
        # rename() replaces a planted symlink itself and never follows it.
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise BlobError(MarkerReason.CACHE_ERROR, f"cache error: {exc.strerror}") from exc

    def _ensure_folder(self, folder: Path) -> Path:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobError(
                MarkerReason.CACHE_ERROR, f"cache error: cannot create folder ({exc.strerror})"
            ) from exc
        if folder.is_symlink() or not folder.is_dir():
            raise BlobError(
                MarkerReason.CACHE_ERROR, f"cache error: {folder.name} is not a real folder"
            )
        self._check_inside(folder)
        return folder

    def _check_inside(self, path: Path) -> None:
        """Second line of defence: the resolved parent must be inside the resolved root."""
        root = Path(os.path.realpath(self.root))
        parent = Path(os.path.realpath(path.parent if path != self.root else path))
        if parent != root and root not in parent.parents:
            raise BlobError(MarkerReason.CACHE_ERROR, "cache error: path escapes the cache")


def file_sha256(path: Path) -> str | None:
    hasher = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1024 * 1024), b""):
                hasher.update(chunk)
    except OSError:
        return None
    return hasher.hexdigest()


_MIME_TOKEN = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


def safe_mime(mime: str | None) -> str:
    """The claimed MIME type if it is a plain `type/subtype` token, else octet-stream."""
    base = (mime or "").split(";", 1)[0].strip().lower()
    return base if _MIME_TOKEN.fullmatch(base) else "application/octet-stream"


def _proved(fmt: Format) -> Validator:
    return lambda _tmp, _head: fmt


def _require_format(kind: MediaKind, head: bytes) -> Format:
    if kind is MediaKind.AUDIO:
        fmt = sniff_audio(head)
        if fmt is None:
            raise BlobError(MarkerReason.NOT_AUDIO, "not audio: no known audio container signature")
        return fmt
    fmt = sniff_image(head)
    if fmt is None:
        what = "markup (HTML/SVG)" if looks_like_markup(head) else "an unknown format"
        raise BlobError(MarkerReason.NOT_IMAGE, f"not an image: the bytes are {what}")
    return fmt
