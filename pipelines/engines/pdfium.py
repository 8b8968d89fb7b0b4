"""PDF text through PDFium (pypdfium2), each document in a fresh child process.

PDFium is not thread-safe, and a worker runs jobs in threads; a fork of a threaded worker
could inherit a lock held by another thread. So each document gets a new interpreter
(`python -I -B -m pipelines.engines.pdfium_child`, writing no bytecode): it caps its own
memory, CPU seconds and file writes before it opens the document, and the parent kills it
at the wall-clock timeout. The child inherits this process's environment (the home's
TMPDIR and cache).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from pipelines.digest import DigestConfig, DocumentError, Extracted, ExtractorFailed
from pipelines.engines import pdfium_child
from pipelines.outcomes import Outcome

_CHILD = "pipelines.engines.pdfium_child"
_ERRORS = {
    pdfium_child.ENCRYPTED: (Outcome.ENCRYPTED_DOCUMENT, "the document is encrypted"),
    pdfium_child.UNREADABLE: (Outcome.UNREADABLE_DOCUMENT, "the document is broken or truncated"),
    pdfium_child.MEMORY: (Outcome.DOCUMENT_TOO_LARGE, "the document needs too much memory"),
    pdfium_child.ERROR: (Outcome.UNREADABLE_DOCUMENT, "the document could not be read"),
}


class PdfiumExtractor:
    name = "pdfium"

    def extract(self, path: Path, config: DigestConfig) -> Extracted:
        request = {
            "path": str(path),
            "max_pages": config.max_pages,
            "max_chars": config.max_chars,
            "address_space": config.address_space,
            "cpu_s": config.timeout_s,
        }
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-B", "-m", _CHILD],
                input=json.dumps(request) + "\n",
                capture_output=True,
                text=True,
                timeout=config.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:  # run() has killed the child
            raise DocumentError(
                Outcome.TIMEOUT, f"reading the document took longer than {config.timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise ExtractorFailed(f"the PDF reader could not start: {exc}") from exc
        return _read(done)


def _read(done: subprocess.CompletedProcess[str]) -> Extracted:
    if done.returncode < 0:
        sig = -done.returncode
        if sig == signal.SIGXCPU:
            raise DocumentError(Outcome.TIMEOUT, "reading the document used its CPU budget")
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        # Most crashes of a capped reader are an allocation it could not make.
        raise DocumentError(Outcome.DOCUMENT_TOO_LARGE, f"the PDF reader stopped ({name})")
    try:
        reply = json.loads(done.stdout.partition("\n")[0])
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        last = done.stderr.strip().splitlines()[-1:] or ["no answer"]
        raise ExtractorFailed(f"the PDF reader gave no answer: {last[0][:200]}")
    if "error" in reply:
        code, what = _ERRORS.get(str(reply["error"]), _ERRORS[pdfium_child.ERROR])
        raise DocumentError(code, f"{what}: {str(reply.get('message', ''))[:200]}")
    texts = reply.get("texts")
    if not isinstance(texts, list):
        raise ExtractorFailed("the PDF reader's answer has no text")
    return Extracted(
        title=str(reply.get("title") or ""),
        pages=int(reply.get("pages") or 0),
        texts=tuple(str(t) for t in texts),
        truncated=bool(reply.get("truncated")),
        peak_kib=int(reply.get("peak_kib") or 0),
    )
