"""The job journal: submitted, unfinished jobs as files on disk, beside the results.

What survives Redis losing its last writes (AOF everysec, a broker host crash) or a message
vanishing between kombu's pop and its unacked record: the client writes one fsynced file per
job before it sends the message; the workers' recovery sweep re-sends a journalled job that
nobody holds, and removes the entry once the job's result is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    job_id: str
    body: dict[str, Any]
    touched: float  # submission or last re-send, unix time


class JobJournal(Protocol):
    """Submitted, unfinished jobs where every node's recovery sweep reads them: files in the
    home (`Journal`) or objects in the bucket (`workers.files.s3.S3Journal`)."""

    def add(self, job_id: str, body: dict[str, Any]) -> None: ...
    def touch(self, job_id: str) -> None: ...
    def remove(self, job_id: str) -> None: ...
    def get(self, job_id: str) -> dict[str, Any] | None: ...
    def entries(self) -> Iterator[Entry]: ...


class Journal:
    """Submitted, unfinished jobs as files next to the results: what survives Redis losing
    its last writes. One fsynced file per job, removed once its result is written."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id[:80]!r}")
        return self.root / f"{job_id}.json"

    def add(self, job_id: str, body: dict[str, Any]) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(self._path(job_id))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise

    def touch(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.utime(self._path(job_id))

    def remove(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(job_id).unlink()

    def get(self, job_id: str) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = json.loads(self._path(job_id).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return body

    def entries(self) -> Iterator[Entry]:
        if not self.root.is_dir():
            return
        for path in self.root.glob("*.json"):
            try:
                touched = path.stat().st_mtime
                body = json.loads(path.read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):
                continue
            yield Entry(path.stem, body, touched)
