"""Document text in long-lived capped child processes: PDF through PDFium (pypdfium2),
DOCX/PPTX/XLSX and HTML/text through the standard library (`office`, `plain_text`).

Every kind is read in a child: all of them parse hostile bytes, and PDFium is not
thread-safe while a worker runs jobs in threads (a fork of a threaded worker could inherit
a lock held by another thread). So documents are read in children
(`python -I -B -m pipelines.engines.reader_child`, a fresh interpreter writing no bytecode)
that cap their own memory, CPU seconds and file writes (see that module). Starting one costs
far more than reading a document, so each worker slot keeps its child for the next one: a
child is taken from the idle pool (or started), used by one thread at a time, and put back
only after a clean answer. Any failure, the wall-clock timeout, or `MAX_USES` documents end
it; the next document gets a fresh one. Children inherit this process's environment (the
home's TMPDIR and cache) and exit when their stdin closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.digest import DigestConfig, DocumentError, Extracted, ExtractorFailed
from pipelines.document_kinds import sniff
from pipelines.engines import frames, reader_child
from pipelines.outcomes import Outcome

_CHILD = "pipelines.engines.reader_child"
MAX_USES = 500  # documents per child: bounds what a slow leak or fragmentation can grow to
PIPE_SIZE = 1024 * 1024
START_TIMEOUT = 60.0  # seconds for a child's imports, apart from any document's timeout
_ERRORS = {
    reader_child.ENCRYPTED: (Outcome.ENCRYPTED_DOCUMENT, "the document is encrypted"),
    reader_child.UNREADABLE: (Outcome.UNREADABLE_DOCUMENT, "the document is broken or truncated"),
    reader_child.MEMORY: (Outcome.DOCUMENT_TOO_LARGE, "the document needs too much memory"),
    reader_child.TOO_LARGE: (Outcome.DOCUMENT_TOO_LARGE, "the document is over the bounds"),
    reader_child.ERROR: (Outcome.UNREADABLE_DOCUMENT, "the document could not be read"),
}


@dataclass(slots=True)
class _Child:
    proc: subprocess.Popen[bytes]
    budget: int  # the address space it was started with
    uses: int = 0

    def ask(self, request: dict[str, Any], limit: int, deadline: float) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        frames.write(self.proc.stdin, request)
        return frames.read_until(self.proc.stdout.fileno(), limit, deadline)

    def end(self) -> int | None:
        """Kill the child and reap it: its exit status (negative: the signal that ended it)."""
        if self.proc.poll() is None:
            self.proc.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        return self.proc.wait()


def _start(budget: int) -> _Child:
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-m", _CHILD, str(budget)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
    except OSError as exc:
        raise ExtractorFailed(f"the document reader could not start: {exc}") from exc
    child = _Child(proc, budget)
    assert proc.stdout is not None
    # A whole answer in the pipe at once: one wake-up of this side, not one per 64 KiB (above
    # the system's pipe-max-size the default size stays: it works, a little slower).
    with contextlib.suppress(OSError):
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    try:
        frames.read_until(proc.stdout.fileno(), 1024, time.monotonic() + START_TIMEOUT)
    except frames.FrameError as exc:
        raise start_failure(child.end(), exc) from None
    return child


def start_failure(status: int | None, exc: Exception) -> ExtractorFailed:
    """Why the reader child ended before it was ready, in words a user can act on."""
    if status == reader_child.MISSING_LIBRARY:
        return ExtractorFailed(
            "the document reader's library (pypdfium2) is not installed where the jobs run:"
            " install mcp-media's `documents` extra (pip install 'mcp-media[documents]')"
        )
    return ExtractorFailed(f"the document reader did not start (status {status}): {exc}")


@dataclass(slots=True)
class DocumentReader:
    name = "pdfium+stdlib"
    _idle: list[_Child] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def extract(self, path: Path, config: DigestConfig) -> Extracted:
        kind = sniff(path)
        if kind is None:
            raise DocumentError(Outcome.UNREADABLE_DOCUMENT, "not a kind of document read here")
        child = self._take(config.address_space)
        request = {
            "reader": kind.value,
            "path": str(path),
            "max_pages": config.max_pages,
            "max_chars": config.max_chars,
            "ocr_pages": config.ocr_pages,
            "cpu_s": config.timeout_s,
        }
        limit = 8 * config.max_chars + 1024 * 1024  # UTF-8 text, JSON escapes, the frame
        try:
            reply = child.ask(request, limit, time.monotonic() + config.timeout_s)
        except frames.FrameTimeout:
            child.end()
            raise DocumentError(
                Outcome.TIMEOUT, f"reading the document took longer than {config.timeout_s:g} s"
            ) from None
        except (frames.FrameError, OSError) as exc:
            raise _stopped(child.end(), exc) from None
        if "error" in reply:
            child.end()  # a reader that met a hostile document is not trusted with the next
            code, what = _ERRORS.get(str(reply["error"]), _ERRORS[reader_child.ERROR])
            raise DocumentError(code, f"{what}: {str(reply.get('message', ''))[:200]}")
        self._give_back(child)
        return _extracted(reply)

    def idle_pids(self) -> list[int]:
        """The process ids of the children waiting for a document (for measurements)."""
        with self._lock:
            return [child.proc.pid for child in self._idle]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.end()

    def _take(self, budget: int) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.budget == budget and child.proc.poll() is None:
                    return child
                child.end()
        return _start(budget)

    def _give_back(self, child: _Child) -> None:
        child.uses += 1
        if child.uses >= MAX_USES:
            child.end()
            return
        with self._lock:
            self._idle.append(child)


def _stopped(status: int | None, exc: Exception) -> Exception:
    if status is not None and status < 0:
        sig = -status
        if sig == signal.SIGXCPU:
            return DocumentError(Outcome.TIMEOUT, "reading the document used its CPU budget")
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        # Most crashes of a capped reader are an allocation it could not make.
        return DocumentError(Outcome.DOCUMENT_TOO_LARGE, f"the document reader stopped ({name})")
    return ExtractorFailed(f"the document reader gave no answer (status {status}): {exc}")


def _extracted(reply: dict[str, Any]) -> Extracted:
    texts, labels = reply.get("texts"), reply.get("labels") or []
    if not isinstance(texts, list) or not isinstance(labels, list):
        raise ExtractorFailed("the document reader's answer has no text")
    return Extracted(
        title=str(reply.get("title") or ""),
        labels=tuple(str(label) for label in labels),
        reader=str(reply.get("reader") or ""),
        pages=int(reply.get("pages") or 0),
        texts=tuple(str(t) for t in texts),
        truncated=bool(reply.get("truncated")),
        peak_kib=int(reply.get("peak_kib") or 0),
        ocr_pages=tuple(int(n) for n in reply.get("ocr") or ()),
    )
