"""Scanned PDF pages (an image of text, no text layer) through the digest: rendered by
PDFium in the reader child and read by our OCR engine, at most `ocr_pages` per document,
their text marked as OCR in the Markdown and the agent's block."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.digest import DigestConfig
from pipelines.outcomes import Outcome
from pipelines.render import digest_note
from pipelines.results import Status
from tests.support.digests import digest_bytes
from tests.support.pdf_writer import scanned_pdf, text_pages

pytestmark = pytest.mark.integration

SENTENCE = "The scanned invoice lists forty brass lanterns."
OTHER = "A second scan names the harbour of Saint Malo."
TYPED = "The typed cover page opens the report."


def test_a_scanned_page_is_read_by_ocr_and_marked_so(tmp_path: Path) -> None:
    data = scanned_pdf(text_pages(1, TYPED, at=0), [[SENTENCE, "Signed by the harbour master."]])
    done = digest_bytes(tmp_path, "scan.pdf", data, DigestConfig())
    assert done.status is Status.DONE, done.reason
    out = done.output
    assert (out["pages"], out["pages_read"], out["ocr_pages"]) == (2, 2, [2])
    assert TYPED in out["excerpt"] and SENTENCE in out["excerpt"]
    markdown = Path(out["markdown"]).read_text(encoding="utf-8")
    assert (
        "## Page 1\n" in markdown
        and f"## Page 2 (OCR: text read from the page's image)\n\n{SENTENCE}" in markdown
    )
    note = digest_note(out)
    assert note is not None and "Pages: 2; text of page 2 read by OCR" in note


def test_ocr_reads_no_more_pages_than_its_setting(tmp_path: Path) -> None:
    data = scanned_pdf([], [[SENTENCE], [OTHER]])
    one = digest_bytes(tmp_path, "two.pdf", data, DigestConfig(ocr_pages=1))
    assert one.status is Status.DONE, one.reason
    assert one.output["ocr_pages"] == [1] and one.output["pages_read"] == 2
    assert SENTENCE in one.output["excerpt"] and "harbour" not in one.output["excerpt"]
    none = digest_bytes(tmp_path, "none.pdf", data, DigestConfig(ocr_pages=0))
    assert (none.status, none.outcome) == (Status.DEGRADED, Outcome.EMPTY_DOCUMENT)
    assert "OCR reads at most 0 scanned pages" in (none.reason or "")
