"""The document reader child: `python -I -B -m pipelines.engines.reader_child BUDGET`.

It reads PDF through PDFium and DOCX/PPTX/XLSX/HTML/text through `office` and `plain_text`.

One child serves one worker slot for many documents (an interpreter costs far more than a
page of text). Requests and answers are length-prefixed JSON frames on stdin/stdout
(`pipelines.engines.frames`), never pickles. After its imports the child says it is ready,
then caps itself for good: its address space (its size then, plus BUDGET bytes, plus room
the OCR engine takes when a scanned page loads it: `pdf_ocr`), core dumps,
and the size of any file it could write (zero: it writes nothing, anywhere). Each request
also gets a CPU-seconds budget on top of what the child has used so far. The parent ends
the child after any failure, its wall-clock timeout, or a number of documents, and reads a
crash or an exhausted budget from the exit status.
"""

from __future__ import annotations

import re
import resource
import sys
from typing import Any

from pipelines.engines import frames

# Error kinds the parent maps to outcome codes (`pipelines.engines.reader`).
ENCRYPTED = "encrypted"
UNREADABLE = "unreadable"
MEMORY = "memory"
TOO_LARGE = "too_large"  # over the zip reader's bounds
ERROR = "error"
REQUEST_LIMIT = 64 * 1024  # bytes of one request frame
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]+")


def _address_space() -> int:
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


def peak_kib() -> int:
    """The child's peak resident memory so far (VmHWM)."""
    with open("/proc/self/status", "rb") as fh:
        for line in fh:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1])
    return 0


def _cap(kind: int, soft: int, *, fixed: bool) -> None:
    """Lower the soft limit to `soft`; with `fixed`, the hard limit too (for good)."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(kind, (soft, soft if fixed else hard))


def clean(text: str) -> str:
    # PDFium ends lines with CRLF and may keep NULs or form feeds from the content stream.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text).strip()


def read_pdf(request: dict[str, Any]) -> dict[str, Any]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    from pipelines.engines import pdf_ocr

    try:
        doc = pdfium.PdfDocument(str(request["path"]))
    except pdfium.PdfiumError as exc:
        locked = exc.err_code in (raw.FPDF_ERR_PASSWORD, raw.FPDF_ERR_SECURITY)
        return {"error": ENCRYPTED if locked else UNREADABLE, "message": str(exc)[:300]}
    try:
        max_pages, max_chars = int(request["max_pages"]), int(request["max_chars"])
        ocr_left = int(request.get("ocr_pages", 0))
        title = clean(doc.get_metadata_value("Title") or "")[:300]
        pages = len(doc)
        texts: list[str] = []
        ocr: list[int] = []  # page numbers whose text OCR read
        total = 0
        truncated = pages > max_pages
        for index in range(min(pages, max_pages)):
            if total >= max_chars:
                truncated = True
                break
            page = doc[index]
            textpage = page.get_textpage()
            text = clean(textpage.get_text_bounded())
            textpage.close()
            if not text and ocr_left > 0 and pdf_ocr.has_image(page):
                ocr_left -= 1
                text = clean(pdf_ocr.read_scanned(page))
                if text:
                    ocr.append(index + 1)
            page.close()
            if total + len(text) > max_chars:
                text, truncated = text[: max_chars - total], True
            texts.append(text)
            total += len(text)
    finally:
        doc.close()
    return {"title": title, "pages": pages, "texts": texts, "truncated": truncated, "ocr": ocr}


def read_office(request: dict[str, Any]) -> dict[str, Any]:
    import zipfile

    from pipelines.engines import office

    kind, path = str(request["reader"]), str(request["path"])
    try:
        return office.read(kind, path, int(request["max_pages"]), int(request["max_chars"]))
    except office.TooLarge as exc:
        return {"error": TOO_LARGE, "message": str(exc)[:300]}
    except (office.Refused, zipfile.BadZipFile, KeyError, EOFError) as exc:
        return {"error": UNREADABLE, "message": f"{type(exc).__name__}: {exc}"[:300]}


def read_text(request: dict[str, Any]) -> dict[str, Any]:
    from pipelines.engines import plain_text

    return plain_text.read(str(request["reader"]), str(request["path"]), int(request["max_chars"]))


READERS = {
    "pdf": read_pdf,
    "docx": read_office,
    "pptx": read_office,
    "xlsx": read_office,
    "html": read_text,
    "text": read_text,
}
NAMES = {"pdf": "pdfium", "docx": "ooxml", "pptx": "ooxml", "xlsx": "ooxml"}  # else: stdlib


def answer(request: dict[str, Any]) -> dict[str, Any]:
    used = resource.getrusage(resource.RUSAGE_SELF)
    _cap(
        resource.RLIMIT_CPU,
        int(used.ru_utime + used.ru_stime + float(request["cpu_s"])) + 1,
        fixed=False,
    )
    try:
        kind = str(request.get("reader", "pdf"))
        reply = READERS[kind](request)
        reply.setdefault("reader", NAMES.get(kind, kind))
    except MemoryError:
        reply = {"error": MEMORY, "message": "the document needs more memory than allowed"}
    except Exception as exc:
        reply = {"error": ERROR, "message": f"{type(exc).__name__}: {exc}"[:300]}
    reply["peak_kib"] = peak_kib()
    return reply


# The exit status of a child whose libraries are not installed (not a document's fault).
MISSING_LIBRARY = 3


def main(argv: list[str]) -> int:
    budget = int(argv[0])
    # Imported before the caps: their size is the baseline the budget is added to.
    try:
        import pypdfium2  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(f"document reader: {exc}\n")
        return MISSING_LIBRARY

    from pipelines.engines import office, pdf_ocr, plain_text  # noqa: F401

    out = sys.stdout.buffer
    frames.write(out, {"ready": True})
    _cap(resource.RLIMIT_FSIZE, 0, fixed=True)
    _cap(resource.RLIMIT_CORE, 0, fixed=True)
    # The hard limit leaves room for the OCR engine, which raises the soft one to it only
    # when it loads (`pdf_ocr`): until a scanned page comes, BUDGET is the bound.
    start = _address_space()
    _cap(resource.RLIMIT_AS, start + budget + pdf_ocr.ADDRESS_SPACE, fixed=True)
    _cap(resource.RLIMIT_AS, start + budget, fixed=False)
    while (request := frames.read_blocking(sys.stdin.buffer, REQUEST_LIMIT)) is not None:
        frames.write(out, answer(request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
