"""Fitted copies kept: `fit` makes the downscaled copy of one image for one set of limits once.

A copy is named by what shaped it: the original's sha256, the limits (`FitLimits`) and
FIT_VERSION (raised whenever `fit_image` would make other bytes from the same image). It is
one file, `<folder>/<key>.fit`: a JSON line (the copy's facts and its own sha256) then the
copy's bytes, written to a temp file and renamed, so a reader sees a whole copy or none. A
copy that is missing, cut short or altered is made again. The folder is kept within its
byte budget: after each write the least recently used copies go first (a read touches one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from dataclasses import asdict
from pathlib import Path

from pipelines.bounded import DecodeBudget
from pipelines.fit import FIT_BUDGET, FitLimits, FittedImage, fit_image

FIT_VERSION = 1
FOLDER = "fitted"  # under the media cache's root
FITTED_BUDGET_BYTES = 256 * 1024 * 1024
SUFFIX = ".fit"
_FACTS = ("mime", "width", "height", "source_width", "source_height", "source_bytes")


class FittedCopies:
    """`fit_image` through a folder of copies made before; safe across threads and processes
    (content-addressed files, written whole by rename)."""

    def __init__(
        self,
        folder: Path,
        budget_bytes: int = FITTED_BUDGET_BYTES,
        decode: DecodeBudget = FIT_BUDGET,
    ) -> None:
        self.folder = folder
        self.budget = budget_bytes
        self.decode = decode
        self.made = 0  # copies this instance encoded (not found in the folder)

    def fit(self, path: Path, sha256: str, mime: str, limits: FitLimits) -> FittedImage | None:
        """`fit_image(path, mime, limits)` for the image whose bytes hash to `sha256`."""
        target = self.folder / f"{copy_key(sha256, mime, limits)}{SUFFIX}"
        found = _read(target)
        if found is not None:
            with contextlib.suppress(OSError):
                os.utime(target)  # recently used: pruned last
            return found
        copy = fit_image(path, mime, limits, self.decode)
        self.made += 1
        if copy is not None:
            with contextlib.suppress(OSError):  # a copy not kept is made again next time
                self._write(target, copy)
                self._prune(keep=target)
        return copy

    def _write(self, target: Path, copy: FittedImage) -> None:
        facts = {name: asdict(copy)[name] for name in _FACTS}
        facts["sha256"] = hashlib.sha256(copy.data).hexdigest()
        facts["size"] = len(copy.data)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.folder / f".tmp-{secrets.token_hex(8)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(json.dumps(facts).encode() + b"\n")
                out.write(copy.data)
            os.replace(tmp, target)  # a copy can be made again: no fsync
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise

    def _prune(self, keep: Path) -> None:
        """Drop the least recently used copies while the folder is over its budget."""
        found: list[tuple[float, int, Path]] = []
        with os.scandir(self.folder) as entries:
            for entry in entries:
                if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime, st.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.budget:
                return
            if path != keep:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                total -= size


def copy_key(sha256: str, mime: str, limits: FitLimits) -> str:
    """The name of the copy of these bytes under these limits, by this version of `fit`."""
    shaped = [FIT_VERSION, sha256, mime, limits.max_side]
    shaped += [limits.max_image_bytes, limits.max_result_bytes]
    return hashlib.sha256(json.dumps(shaped).encode()).hexdigest()


def _read(target: Path) -> FittedImage | None:
    """The copy in `target`, or None when it is missing or not whole and unaltered."""
    try:
        with open(target, "rb") as handle:  # one open, not a stat then a read
            head = handle.readline(4096)
            data = handle.read()
        facts = json.loads(head)
        if facts["size"] != len(data) or facts["sha256"] != hashlib.sha256(data).hexdigest():
            return None
        return FittedImage(data=data, **{name: facts[name] for name in _FACTS})
    except (OSError, ValueError, KeyError, TypeError):
        return None
