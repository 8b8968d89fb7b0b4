"""The PDF extraction child: `python -I -m pipelines.engines.pdfium_child`, one document.

PDFium is not thread-safe and parses hostile bytes, so it runs here, in a fresh process of
its own: the request comes as one JSON line on stdin (`path`, `max_pages`, `max_chars`,
`address_space`, `cpu_s`), the answer goes out as one JSON line on stdout, never a pickle.
Before the document is opened the process caps its own address space (its size after the
import plus the budget), its CPU seconds, and the size of any file it could write (zero:
it writes nothing, anywhere); a crash, an exhausted budget or a kill by the parent's
timeout is read by the parent from the exit status.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

# Error kinds the parent maps to outcome codes (`pipelines.digest`).
ENCRYPTED = "encrypted"
UNREADABLE = "unreadable"
MEMORY = "memory"
ERROR = "error"


def _address_space() -> int:
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


def _peak_kib() -> int:
    with open("/proc/self/status", "rb") as fh:
        for line in fh:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1])
    return 0


def _limit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard if hard != resource.RLIM_INFINITY else value))


def _clean(text: str) -> str:
    # PDFium ends lines with CRLF and may keep NULs or form feeds from the content stream.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in "\n\t" or ch >= " ").strip()


def extract(request: dict[str, Any]) -> dict[str, Any]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    cpu = int(request["cpu_s"]) + 1
    _limit(resource.RLIMIT_CPU, cpu)
    _limit(resource.RLIMIT_AS, _address_space() + int(request["address_space"]))
    try:
        doc = pdfium.PdfDocument(str(request["path"]))
    except pdfium.PdfiumError as exc:
        locked = exc.err_code in (raw.FPDF_ERR_PASSWORD, raw.FPDF_ERR_SECURITY)
        return {"error": ENCRYPTED if locked else UNREADABLE, "message": str(exc)[:300]}
    max_pages, max_chars = int(request["max_pages"]), int(request["max_chars"])
    title = _clean(doc.get_metadata_value("Title") or "")[:300]
    pages = len(doc)
    texts: list[str] = []
    total = 0
    truncated = pages > max_pages
    for index in range(min(pages, max_pages)):
        if total >= max_chars:
            truncated = True
            break
        page = doc[index]
        textpage = page.get_textpage()
        text = _clean(textpage.get_text_bounded())
        textpage.close()
        page.close()
        if total + len(text) > max_chars:
            text, truncated = text[: max_chars - total], True
        texts.append(text)
        total += len(text)
    doc.close()
    return {"title": title, "pages": pages, "texts": texts, "truncated": truncated}


def main() -> int:
    request = json.loads(sys.stdin.readline())
    try:
        reply = extract(request)
    except MemoryError:
        reply = {"error": MEMORY, "message": "the document needs more memory than allowed"}
    except Exception as exc:
        reply = {"error": ERROR, "message": f"{type(exc).__name__}: {exc}"[:300]}
    reply["peak_kib"] = _peak_kib()
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
