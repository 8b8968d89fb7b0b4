"""The digest's excerpt: a piece of the Markdown counted as read_document counts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.digest import Extracted, excerpt_of, to_markdown, write_beside
from pipelines.render import digest_note
from workers.doors.mcp.read_document import CachedDocument, read_range

pytestmark = pytest.mark.unit

WORDS = "The heron counts seven blue stones by the quiet river and then it flies away."


def extracted(title: str, *texts: str) -> Extracted:
    return Extracted(title=title, pages=len(texts), texts=texts, truncated=False)


@pytest.mark.parametrize("title", ["Heron ## Report", ""])
@pytest.mark.parametrize("limit", [0, 1, 9, 30, 47, 200, 10_000])
def test_the_excerpt_is_the_markdown_from_page_one_and_reading_on_continues_it(
    title: str, limit: int
) -> None:
    doc = extracted(title, WORDS * 3, "", WORDS)
    markdown = to_markdown(doc)
    excerpt, end = excerpt_of(doc, markdown, limit)
    start = markdown.index("## Page 1")
    assert markdown[start:end].rstrip() == excerpt and not excerpt[-1:].isspace()
    heading = "## Page 1\n"
    assert excerpt.startswith(heading) or heading.startswith(excerpt)
    assert len(excerpt) <= limit
    assert not title or "Heron" not in excerpt  # the title is a field of its own
    rest = read_range(markdown, None, end, 10**6)["text"]
    assert (excerpt + rest).split() == markdown[start:].split()  # nothing skipped or repeated


def test_a_cut_inside_a_word_goes_back_to_the_word_s_start() -> None:
    doc = extracted("", WORDS)
    markdown = to_markdown(doc)
    inside = len("## Page 1\n\n") + WORDS.index("stones") + 3  # "sto|nes"
    excerpt, end = excerpt_of(doc, markdown, inside)
    assert excerpt.endswith("blue") and markdown[end] == " "
    # One word longer than the last fifth of the limit is cut where the limit falls.
    long = extracted("", "x" * 500)
    excerpt, end = excerpt_of(long, to_markdown(long), 100)
    assert len(excerpt) == 100


def test_the_digest_line_names_the_offset_to_read_on_from() -> None:
    doc = extracted("Heron", WORDS * 40)
    markdown = to_markdown(doc)
    excerpt, end = excerpt_of(doc, markdown, 400)
    output = {
        "title": "Heron",
        "pages": 1,
        "pages_read": 1,
        "chars": len(markdown),
        "excerpt": excerpt,
        "excerpt_end": end,
        "markdown": "/c/heron.pdf.md",
    }
    last = (digest_note(output) or "").splitlines()[-1]
    assert f"its characters up to {end} of {len(markdown)} are above" in last
    assert f"read_document tool (offset={end}, or by page)" in last
    del output["markdown"]  # on a node without the text
    last = (digest_note(output) or "").splitlines()[-1]
    assert "saved to" not in last and f"offset={end}" in last
    # All of it shown: nothing to read on from.
    whole, end = excerpt_of(doc, markdown, 10**6)
    assert end == len(markdown) and whole == markdown[markdown.index("## ") :].rstrip()
    output |= {"excerpt": whole, "excerpt_end": end}
    last = (digest_note(output) or "").splitlines()[-1]
    assert f"all {len(markdown)} characters are above" in last and "offset=" not in last


def test_a_cut_goes_back_to_any_blank_not_only_a_space() -> None:
    doc = extracted("", "alpha\tbeta\u00a0gamma\tdelta\tepsilon zeta")
    markdown = to_markdown(doc)
    inside = markdown.index("epsilon") + 4  # "epsi|lon"
    excerpt, end = excerpt_of(doc, markdown, inside)
    assert excerpt.endswith("delta") and markdown[end] == "\t"


def test_office_line_ends_are_one_character_in_the_file_and_in_the_offsets(
    tmp_path: Path,
) -> None:
    """Office text can carry CRLF: the Markdown has plain line ends, so an offset counted when
    it was written is the same when read_document reads the file back."""
    doc = extracted("A\r\nreport", "line one\r\nline two\r\n" * 30, "last\rline")
    markdown = to_markdown(doc)
    assert "\r" not in markdown and markdown.startswith("# A report\n\n## Page 1\n")
    original = tmp_path / "report.docx"
    original.write_bytes(b"")
    write_beside(original, markdown)
    excerpt, end = excerpt_of(doc, markdown, 100)
    text = CachedDocument(original, "0" * 64).text()
    assert text == markdown
    rest = read_range(text, None, end, 40)["text"]
    assert markdown.startswith(rest, end) and markdown[:end].rstrip().endswith(excerpt)


def test_no_excerpt_says_so_and_where_to_read() -> None:
    doc = extracted("", WORDS)
    markdown = to_markdown(doc)
    excerpt, end = excerpt_of(doc, markdown, 0)
    output = {
        "pages": 1,
        "pages_read": 1,
        "chars": len(markdown),
        "excerpt": excerpt,
        "excerpt_end": end,
        "markdown": "/c/a.pdf.md",
    }
    last = (digest_note(output) or "").splitlines()[-1]
    assert f"({len(markdown)} characters, none shown here)" in last and "offset=0" in last


def test_a_range_read_on_ends_at_a_word_s_end_too() -> None:
    markdown = to_markdown(extracted("", WORDS * 20))
    part = read_range(markdown, None, 0, 100)
    stop = part["next_offset"]
    assert 80 <= stop <= 100 and markdown[stop].isspace() and part["text"] == markdown[:stop]
    pages = read_range(markdown, (1, 1), None, 100)
    assert pages["truncated"] and markdown[pages["next_offset"]].isspace()
