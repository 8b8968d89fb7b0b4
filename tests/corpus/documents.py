"""Hostile documents for the digest stage: each case's payload is a document's bytes (the
file a tool result saved), read by the real reader child, and what must come of it: the
outcome code (or "done"), words of its reason or text, and the bounds it stays within.

Every case is generated at test time from `tests.support.pdf_writer` and `office_writer`
(no binary fixture is committed); `tests.corpus.build` registers them with the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.engines import office
from tests.support import office_writer, pdf_writer

SENTENCE = "The lighthouse keeper counts seventeen gulls at dawn."
DOCUMENT_SECONDS = 60.0  # wall clock of one digest on a busy machine, far above the usual
DOCUMENT_RSS_MIB = 400  # the reader child's peak resident memory


@dataclass(frozen=True, slots=True)
class DocumentCase:
    name: str
    why: str
    file: str  # the name the document is saved under (its suffix is never trusted)
    build: Callable[[], bytes]
    outcome: str  # an outcome code, or "done"
    says: str = ""  # in the reason (or, when done, in the text)
    pages_read: int = -1  # when done: pages read (-1: not checked)


def _pdf(pages: int, encrypt: bool = False, shared_pages: int = 0) -> bytes:
    lines = pdf_writer.text_pages(pages, SENTENCE, at=0)
    return pdf_writer.build_pdf(lines, encrypt=encrypt, shared_pages=shared_pages)


def good_pdf() -> bytes:
    """The document read after each hostile one: the reader must still serve."""
    return _pdf(3)


CASES = (
    DocumentCase(
        "document_pdf_page_bomb",
        "a PDF of 20,001 pages sharing one content stream (3 MB): read to the page cap only",
        "bomb.pdf",
        lambda: _pdf(1, shared_pages=20_000),
        "done",
        SENTENCE,
        pages_read=200,
    ),
    DocumentCase(
        "document_pdf_encrypted",
        "a PDF locked by a user password nobody knows",
        "locked.pdf",
        lambda: _pdf(2, encrypt=True),
        "encrypted_document",
        "encrypted",
    ),
    DocumentCase(
        "document_pdf_truncated",
        "a PDF cut after 2,500 bytes: no cross-reference table, no trailer",
        "cut.pdf",
        lambda: _pdf(4)[:2500],
        "unreadable_document",
        "broken or truncated",
    ),
    DocumentCase(
        "document_docx_zip_bomb",
        "a DOCX whose body unzips to 8 MiB over the reader's budget (260 KB zipped)",
        "bomb.docx",
        lambda: office_writer.zip_bomb_docx(office.MAX_UNZIPPED // (1024 * 1024) + 8),
        "document_too_large",
        "once unzipped",
    ),
    DocumentCase(
        "document_docx_entity_bomb",
        "a DOCX body declaring nested XML entities (a billion laughs)",
        "entities.docx",
        office_writer.entity_bomb_docx,
        "unreadable_document",
        "entities are refused",
    ),
    DocumentCase(
        "document_docx_too_many_members",
        "a DOCX with one more member than the reader opens",
        "crowded.docx",
        lambda: office_writer.crowded_docx(office.MAX_MEMBERS + 1),
        "document_too_large",
        "members in the archive",
    ),
)
