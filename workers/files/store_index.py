"""The index a store keeps of what it holds, for planning a reprocess run: the input blobs of
a kind, and the results of one (capability, processor version), each listed in sha256
order from any point, so that a plan is a streaming merge of sorted lists in bounded memory
and a run resumes by listing again after the last sha256 it submitted.

A bucket keeps marker objects (`workers.files.index_layout`, `workers.files.s3_index`); a
local cache is its own index: its folders, listed and sorted in bounded memory
(`workers.files.sorted_names`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipelines.cache import OUTPUTS, MediaCache, file_sha256
from pipelines.digest import is_saved_markdown
from pipelines.errors import PermanentError
from pipelines.ingest import digestible
from pipelines.media import Capability, MediaKind
from pipelines.results import ResultKey, Sidecars, Status
from workers.core.blob_ref import BlobRef
from workers.core.stage_configs import SPEECH_REQUEST
from workers.files.blobs import Listed
from workers.files.index_layout import Indexed
from workers.files.sorted_names import sorted_names

__all__ = ["Backfilled", "Indexed", "LocalIndex", "StoreIndex"]

_HEX = frozenset("0123456789abcdef")
SIDECAR = ".json"


@dataclass(frozen=True, slots=True)
class Backfilled:
    """What indexing the blobs and results stored before the index took."""

    blobs_marked: int = 0  # input and output markers written for blobs found unindexed
    results_read: int = 0  # sidecars read for their status
    unsettled_marked: int = 0  # markers written for results that are not done


class StoreIndex(Protocol):
    def prepare(
        self,
        versions: Sequence[tuple[Capability, str]],
        *,
        unsettled: bool,
        again: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> Backfilled:
        """Make the index whole for planning `versions`: index the blobs stored before it
        (once; `again` looks for unindexed blobs anew) and, with `unsettled`, the status of
        each version's results stored before it (once per version)."""
        ...

    def inputs(self, kind: MediaKind, after: str = "") -> Iterator[Indexed]:
        """Every input blob of `kind` (never our own outputs) whose sha256 sorts after
        `after`, in sha256 order."""
        ...

    def listed(self, kind: MediaKind, item: Indexed) -> Listed | None:
        """The blob `item` names, with its size and time; None when it is gone."""
        ...

    def results(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        """The sha256 of every stored result of (capability, version), after `after`, in
        order."""
        ...

    def unsettled(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        """The sha256 of every stored result of (capability, version) that is not done
        (degraded or failed), after `after`, in order."""
        ...


class LocalIndex:
    """One machine: the cache's folders and the sidecars' folders are the index."""

    def __init__(self, cache: MediaCache, sidecars: Path) -> None:
        self.cache = cache
        self.sidecars = sidecars

    def prepare(
        self,
        versions: Sequence[tuple[Capability, str]],
        *,
        unsettled: bool,
        again: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> Backfilled:
        return Backfilled()  # the folders are the index: nothing was stored beside it

    def inputs(self, kind: MediaKind, after: str = "") -> Iterator[Indexed]:
        if kind is MediaKind.DOCUMENT:
            yield from _documents(self.cache.folder(kind), after)
            return
        names = sorted_names(_named(self.cache.folder(kind), after, files=True))
        # Our own outputs (spoken replies) are marked by an empty file each: left out.
        outputs = iter(sorted_names(_named(self.cache.root / OUTPUTS, after, files=False)))
        output = next(outputs, None)
        for name in names:
            sha256, ext = name[:64], name[64:]
            while output is not None and output < sha256:
                output = next(outputs, None)
            if output != sha256 and ext.startswith("."):
                yield Indexed(sha256, ext)

    def listed(self, kind: MediaKind, item: Indexed) -> Listed | None:
        path = self.cache.folder(kind) / f"{item.sha256}{item.ext}"
        if kind is MediaKind.DOCUMENT:  # kept under its own name: found by its hash
            found = self.cache.find_document(item.sha256)
            if found is None:
                return None
            path = found.path
        try:
            st = path.lstat()
            ref = BlobRef(item.sha256, kind, item.ext.lower(), st.st_size)
        except (OSError, PermanentError):
            return None
        return Listed(ref, st.st_mtime, path)

    def results(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        folder = self.sidecars / capability.value / version
        for name in sorted_names(_named(folder, after, files=True)):
            if name.endswith(SIDECAR) and len(name) == 64 + len(SIDECAR):
                yield name[:64]

    def unsettled(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        files = Sidecars(self.sidecars)
        for sha256 in self.results(capability, version, after):
            found = files.read(ResultKey(capability, version, sha256))
            if found is not None and found.status is not Status.DONE:
                yield sha256


def _documents(root: Path, after: str) -> Iterator[Indexed]:
    """The documents a digest reads, in sha256 order after `after`. Each keeps its own name
    in a folder named by its hash's first 16 digits, so the files of each folder are hashed
    (a local cache's documents, read once a run); the Markdown a digest saved beside its
    original is left out, and so are speech requests and what no digest reads (an archive,
    a binary)."""
    start = after[:16]
    for prefix in sorted_names(_folders(root, start)):
        found: list[Indexed] = []
        folder = root / prefix
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            if is_saved_markdown(path):
                continue  # a digest's Markdown beside its original
            if path.name == SPEECH_REQUEST:
                continue  # what a voice was asked to say: no document of a tool's
            sha256 = file_sha256(path) or ""
            if sha256.startswith(prefix) and sha256 > after and digestible(path):
                found.append(Indexed(sha256, path.suffix.lower() if _ext(path) else ""))
        yield from sorted(found, key=lambda item: item.sha256)


def _folders(root: Path, start: str) -> Iterator[str]:
    """The hash-prefix folders under `root` from `start` on."""
    try:
        entries = os.scandir(root)
    except FileNotFoundError:
        return
    with entries:
        for entry in entries:
            name = entry.name
            hashed = len(name) == 16 and set(name) <= _HEX and name >= start
            if hashed and entry.is_dir(follow_symlinks=False):
                yield name


def _ext(path: Path) -> bool:
    """Whether the file's suffix is one a blob reference carries."""
    suffix = path.suffix.lower()
    return 2 <= len(suffix) <= 9 and suffix[1:].isalnum() and suffix.isascii()


def _named(folder: Path, after: str, *, files: bool) -> Iterator[str]:
    """The names in `folder` that start with a sha256 sorting after `after` (temporary files
    and anything else we did not write are left out)."""
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        for entry in entries:
            sha256 = entry.name[:64]
            if len(sha256) != 64 or not set(sha256) <= _HEX or sha256 <= after:
                continue
            if files and not entry.is_file(follow_symlinks=False):
                continue
            yield entry.name
