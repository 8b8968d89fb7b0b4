"""The PDF digest stage on documents the test writes: the text, the caps, and each hostile
kind ending in its outcome code, with a good document digested after each one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.digest import DigestConfig, markdown_path
from pipelines.engines.reader import DocumentReader
from pipelines.outcomes import Outcome
from pipelines.results import Status
from tests.support.digests import READER, digest_bytes
from tests.support.pdf_writer import build_pdf, text_pages
from workers.doors.mcp.read_document import read_range

pytestmark = pytest.mark.integration

FIRST = "The heron counts seven blue stones by the quiet river."
MIDDLE = "Amber lanterns guide the night ferry past the old mill."


_digest = digest_bytes


def _good(tmp_path: Path, config: DigestConfig) -> None:
    """A document digested after a hostile one: the reader is still whole."""
    pages = text_pages(3, FIRST, at=0)
    done = _digest(tmp_path, "after.pdf", build_pdf(pages, title="After"), config)
    assert done.status is Status.DONE, done.reason
    assert FIRST in done.output["excerpt"]


def test_a_multi_page_pdf_gives_title_pages_excerpt_and_the_whole_text(tmp_path: Path) -> None:
    pages = text_pages(12, FIRST, at=0)
    pages[7][5] = MIDDLE
    config = DigestConfig(excerpt_chars=600)
    done = _digest(tmp_path, "report.pdf", build_pdf(pages, title="Heron Report"), config)
    assert done.status is Status.DONE, done.reason
    out = done.output
    assert (out["title"], out["pages"], out["pages_read"]) == ("Heron Report", 12, 12)
    assert out["truncated"] is False and out["extractor"] == "pdfium"
    assert FIRST in out["excerpt"] and MIDDLE not in out["excerpt"]
    saved = Path(out["markdown"])
    assert saved == markdown_path(tmp_path / "report.pdf") and saved.name == "report.pdf.md"
    text = saved.read_text(encoding="utf-8")
    assert text.startswith("# Heron Report\n") and "## Page 12\n" in text
    # The excerpt is the Markdown from page 1 on, counted as read_document counts: reading
    # on from its end continues the text exactly, and no word is cut in two.
    end = out["excerpt_end"]
    assert out["chars"] == len(text) and out["excerpt"].startswith("## Page 1\n")
    assert text.startswith(out["excerpt"], text.index("## Page 1\n"))
    assert 480 <= len(out["excerpt"]) <= 600 and text[end].isspace()
    part = read_range(text, None, end, 100)
    assert part["offset"] == end and (out["excerpt"] + part["text"]) in text
    assert FIRST in text and MIDDLE in text and "Page 12 line 30 of the generated report." in text
    assert out["peak_kib"] > 0


def test_the_caps_bound_pages_and_characters(tmp_path: Path) -> None:
    pages = text_pages(10, FIRST, at=0)
    by_pages = _digest(tmp_path, "a.pdf", build_pdf(pages), DigestConfig(max_pages=3))
    assert by_pages.status is Status.DONE
    assert (by_pages.output["pages"], by_pages.output["pages_read"]) == (10, 3)
    assert by_pages.output["truncated"] is True
    assert "3 of 10 pages read" in Path(by_pages.output["markdown"]).read_text()
    by_chars = _digest(tmp_path, "b.pdf", build_pdf(pages), DigestConfig(max_chars=1500))
    assert by_chars.status is Status.DONE and by_chars.output["truncated"] is True
    markdown = Path(by_chars.output["markdown"]).read_text(encoding="utf-8")
    assert by_chars.output["chars"] == len(markdown)
    pages_text = re.sub(r"^## .*\n|^\(text ends here.*\n", "", markdown, flags=re.M)
    assert len(pages_text.strip()) <= 1500 + 3 * by_chars.output["pages_read"]


def test_a_page_bomb_is_read_to_the_page_cap_only(tmp_path: Path) -> None:
    config = DigestConfig(max_pages=40)
    bomb = build_pdf(text_pages(1, FIRST, at=0), shared_pages=20_000)
    done = _digest(tmp_path, "bomb.pdf", bomb, config)
    assert done.status is Status.DONE, done.reason
    assert (done.output["pages"], done.output["pages_read"]) == (20_001, 40)
    assert done.output["truncated"] is True
    _good(tmp_path, config)


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("locked.pdf", build_pdf(text_pages(2, FIRST), encrypt=True), Outcome.ENCRYPTED_DOCUMENT),
        ("cut.pdf", build_pdf(text_pages(4, FIRST))[:2500], Outcome.UNREADABLE_DOCUMENT),
        ("junk.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 100, Outcome.UNREADABLE_DOCUMENT),
        ("empty.pdf", b"", Outcome.EMPTY_DOCUMENT),
        ("blank.pdf", build_pdf([[], []]), Outcome.EMPTY_DOCUMENT),
    ],
)
def test_hostile_documents_end_in_their_code(
    tmp_path: Path, name: str, data: bytes, code: Outcome
) -> None:
    config = DigestConfig()
    failed = _digest(tmp_path, name, data, config)
    assert (failed.status, failed.outcome) == (Status.DEGRADED, code), failed.reason
    assert not markdown_path(tmp_path / name).exists()
    _good(tmp_path, config)


def test_the_time_and_memory_budgets_end_in_their_codes(tmp_path: Path) -> None:
    data = build_pdf(text_pages(5, FIRST))
    slow = _digest(tmp_path, "slow.pdf", data, DigestConfig(timeout_s=0.001))
    assert (slow.status, slow.outcome) == (Status.DEGRADED, Outcome.TIMEOUT), slow.reason
    # Hundreds of pages of text need more than 64 KiB more than the child's size at start.
    large = build_pdf(text_pages(300, FIRST))
    tight = _digest(tmp_path, "tight.pdf", large, DigestConfig(address_space=64 * 1024))
    assert (tight.status, tight.outcome) == (
        Status.DEGRADED,
        Outcome.DOCUMENT_TOO_LARGE,
    ), tight.reason
    _good(tmp_path, DigestConfig())


def test_one_child_reads_document_after_document_and_a_failure_replaces_it(
    tmp_path: Path,
) -> None:
    config = DigestConfig()
    assert isinstance(READER, DocumentReader)
    _good(tmp_path, config)
    (first,) = READER.idle_pids()
    _good(tmp_path, config)
    assert READER.idle_pids() == [first]  # the same child, not a new interpreter
    cut = _digest(tmp_path, "cut.pdf", build_pdf(text_pages(4, FIRST))[:2500], config)
    assert cut.outcome is Outcome.UNREADABLE_DOCUMENT
    assert READER.idle_pids() == []  # the child that met it is gone
    assert not Path(f"/proc/{first}").exists()
    _good(tmp_path, config)
    (second,) = READER.idle_pids()
    assert second != first
