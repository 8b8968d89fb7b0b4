"""DOCX, PPTX, XLSX, HTML and Markdown through the digest stage (the reader child), each on
a document the test writes with a sentence the agent's text must hold; zip bombs, XML
bombs and crowded archives end in their codes within the bounds, and the next is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.digest import DigestConfig, markdown_path
from pipelines.engines import office
from pipelines.outcomes import Outcome
from pipelines.results import Status
from tests.support import office_writer
from tests.support.digests import digest_bytes

pytestmark = pytest.mark.integration

SENTENCE = "The cartographer inks a hidden cove on the northern coast."
LATE = "Nine herons nest behind the lighthouse in late spring."
_digest = digest_bytes


def _filler(count: int) -> list[str]:
    return [f"Filler paragraph {n} of the generated document." for n in range(count)]


DETAIL: list[list[str | int]] = [[line, n] for n, line in enumerate(_filler(300))]
DOCUMENTS = {
    "notes.docx": office_writer.docx([SENTENCE, *_filler(200), LATE], title="Cove Notes"),
    "deck.pptx": office_writer.pptx(
        [["Opening", SENTENCE], *[_filler(5) for _ in range(30)], [LATE]], title="Cove Deck"
    ),
    "book.xlsx": office_writer.xlsx(
        {
            "Summary": [["Note", "Count"], [SENTENCE, 7]],
            "Detail": [*DETAIL, [LATE, 9]],
        },
        title="Cove Book",
    ),
    "page.html": (
        "<!doctype html><html><head><title>Cove Page</title><style>p{color:red}</style>"
        f"<script>steal()</script></head><body><h1>Cove</h1><p>{SENTENCE}</p>"
        + "".join(f"<div>{line}</div>" for line in _filler(200))
        + f"<p>{LATE}</p></body></html>"
    ).encode(),
    "notes.md": (
        f"# Cove Notes\n\n{SENTENCE}\n\n" + "\n".join(_filler(200)) + f"\n\n{LATE}\n"
    ).encode(),
}
TITLES = {
    "notes.docx": "Cove Notes",
    "deck.pptx": "Cove Deck",
    "book.xlsx": "Cove Book",
    "page.html": "Cove Page",
    "notes.md": "Cove Notes",
}


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_each_kind_gives_its_text_and_the_whole_markdown(tmp_path: Path, name: str) -> None:
    done = _digest(tmp_path, name, DOCUMENTS[name], DigestConfig(excerpt_chars=400))
    assert done.status is Status.DONE, done.reason
    out = done.output
    assert out["title"] == TITLES[name]
    assert SENTENCE in out["excerpt"] and LATE not in out["excerpt"]
    whole = Path(out["markdown"]).read_text(encoding="utf-8")
    assert whole.startswith(f"# {TITLES[name]}\n") and SENTENCE in whole and LATE in whole
    assert "steal()" not in whole and "color:red" not in whole


def test_slides_and_sheets_are_the_pages_and_their_headings(tmp_path: Path) -> None:
    deck = _digest(tmp_path, "deck.pptx", DOCUMENTS["deck.pptx"], DigestConfig(max_pages=4))
    assert (deck.output["pages"], deck.output["pages_read"]) == (32, 4)
    assert deck.output["truncated"] is True
    slides = Path(deck.output["markdown"]).read_text(encoding="utf-8")
    assert "## Slide 1\n\nOpening\n" + SENTENCE in slides and "## Slide 5" not in slides
    book = _digest(tmp_path, "book.xlsx", DOCUMENTS["book.xlsx"], DigestConfig())
    sheets = Path(book.output["markdown"]).read_text(encoding="utf-8")
    assert f"## Sheet: Summary\n\nNote\tCount\n{SENTENCE}\t7\n" in sheets
    assert "## Sheet: Detail\n" in sheets and f"{LATE}\t9" in sheets


@pytest.mark.parametrize(
    ("name", "data", "code", "said"),
    [
        (
            "bomb.docx",
            office_writer.zip_bomb_docx(office.MAX_UNZIPPED // (1024 * 1024) + 8),
            Outcome.DOCUMENT_TOO_LARGE,
            "once unzipped",
        ),
        (
            "entities.docx",
            office_writer.entity_bomb_docx(),
            Outcome.UNREADABLE_DOCUMENT,
            "entities are refused",
        ),
        (
            "crowded.docx",
            office_writer.crowded_docx(office.MAX_MEMBERS + 1),
            Outcome.DOCUMENT_TOO_LARGE,
            "members in the archive",
        ),
        (
            "cut.xlsx",
            DOCUMENTS["book.xlsx"][: len(DOCUMENTS["book.xlsx"]) // 2],
            Outcome.UNREADABLE_DOCUMENT,
            "",
        ),
    ],
)
def test_hostile_office_files_end_in_their_code(
    tmp_path: Path, name: str, data: bytes, code: Outcome, said: str
) -> None:
    failed = _digest(tmp_path, name, data, DigestConfig())
    assert (failed.status, failed.outcome) == (Status.DEGRADED, code), failed.reason
    assert said in (failed.reason or "")
    assert not markdown_path(tmp_path / name).exists()
    after = _digest(tmp_path, "after.docx", DOCUMENTS["notes.docx"], DigestConfig())
    assert after.status is Status.DONE and SENTENCE in after.output["excerpt"]
