"""What kind of document a file is, by its bytes (never by the MIME type a tool claimed).

PDF by its header within the first KiB (as readers accept); DOCX, PPTX and XLSX by the
part each must hold in its zip archive; HTML by a tag near its start; plain text and
Markdown when the head decodes as UTF-8 with no NUL byte. Anything else is no document a
digest reads.
"""

from __future__ import annotations

import zipfile
from enum import StrEnum
from pathlib import Path

_HEAD = 4096
_OFFICE = {
    "word/document.xml": "docx",
    "ppt/presentation.xml": "pptx",
    "xl/workbook.xml": "xlsx",
}


class DocumentKind(StrEnum):
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    HTML = "html"
    TEXT = "text"


def sniff(path: Path) -> DocumentKind | None:
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
    except OSError:
        return None
    if b"%PDF-" in head[:1024]:
        return DocumentKind.PDF
    if head.startswith(b"PK\x03\x04"):
        return _office(path)
    if not head or b"\x00" in head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a character cut at the end of the head
            return None
        text = head[: exc.start].decode("utf-8")
    lowered = text.lstrip("\ufeff \t\r\n").lower()
    if lowered.startswith(("<!doctype html", "<html")) or "<body" in lowered:
        return DocumentKind.HTML
    return DocumentKind.TEXT


def _office(path: Path) -> DocumentKind | None:
    try:
        with zipfile.ZipFile(path) as archive:
            for name, kind in _OFFICE.items():
                try:
                    archive.getinfo(name)
                except KeyError:
                    continue
                return DocumentKind(kind)
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    return None
