"""The document digest stage: a document's title, pages and text, for the agent to read.

An extractor (a port: the engines live in `pipelines.engines`) reads at most `max_pages`
pages and `max_chars` characters; all the text read is saved beside the original as
Markdown (`<original>.md`), and the result carries at most `excerpt_chars` of it for the
agent's block (from its first page, ended at a word's end) with the Markdown's path, its
length and the offset the excerpt ends at: counted in the Markdown itself, so read_file and
read_document's `offset` read on exactly where the excerpt stopped. Encrypted, broken,
truncated and empty documents end in their own outcome codes; none of them raises past
`digest_document`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipelines.errors import PermanentError, TransientError, outcome_of
from pipelines.outcomes import Outcome
from pipelines.results import StageOutcome, Status


@dataclass(frozen=True, slots=True)
class DigestConfig:
    """Caps of one digest: every field changes the output, so all are in its version."""

    max_pages: int = 200
    max_chars: int = 500_000
    excerpt_chars: int = 2_000
    timeout_s: float = 60.0
    address_space: int = 1024 * 1024 * 1024  # bytes the extraction child may add
    ocr_pages: int = 2  # pages without a text layer read by OCR, per document


@dataclass(frozen=True, slots=True)
class Extracted:
    """What an extractor read: `pages` is the document's count, `texts` one per page read."""

    title: str
    pages: int
    texts: tuple[str, ...]
    truncated: bool  # pages or characters were left unread by the caps
    peak_kib: int = 0  # the extraction child's peak resident memory
    labels: tuple[str, ...] = ()  # a heading per text ("Slide 2", "Sheet: Q3"); else "Page N"
    reader: str = ""  # what read this kind ("pdfium", "ooxml", ...); else the extractor
    ocr_pages: tuple[int, ...] = ()  # numbers (from 1) of the pages whose text OCR read


class DocumentError(PermanentError):
    """The document cannot be read; `outcome` names why."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


class ExtractorFailed(TransientError):
    """The extractor itself could not run (its program missing, no process to start)."""

    outcome = Outcome.ENGINE_FAILED


class Extractor(Protocol):
    name: str  # what the processor version is keyed by

    def extract(self, path: Path, config: DigestConfig) -> Extracted: ...

    def close(self) -> None: ...  # ends any process the extractor keeps


def markdown_path(original: Path) -> Path:
    """Where the full text of `original` is saved: beside it, `<name>.md`."""
    return original.with_name(original.name + ".md")


def is_saved_markdown(path: Path) -> bool:
    """Whether `path` is the Markdown a digest saved beside its original (`markdown_path`),
    not a document of its own."""
    return path.suffix == ".md" and path.with_name(path.stem).is_file()


def to_markdown(extracted: Extracted) -> str:
    """The text read, a section per page, with plain `\\n` line ends (Office text can carry
    `\\r\\n`): one character per character whatever reads the file back."""
    parts = [_title_line(extracted)] if extracted.title else []
    for number, page in enumerate(extracted.texts, start=1):
        text = page.replace("\r\n", "\n").replace("\r", "\n")
        label = extracted.labels[number - 1] if number <= len(extracted.labels) else ""
        label = label or f"Page {number}"
        if number in extracted.ocr_pages:
            label += " (OCR: text read from the page's image)"
        parts.append(f"## {label}\n\n{text}\n")
    if extracted.truncated:
        parts.append(
            f"(text ends here: {len(extracted.texts)} of {extracted.pages} pages read, "
            "within the digest's limits)\n"
        )
    return "\n".join(parts)


def _title_line(extracted: Extracted) -> str:
    """The title as one heading line: a line break in it would start a section of its own."""
    return f"# {' '.join(extracted.title.split())}\n"


def word_end(text: str, start: int, end: int) -> int:
    """`end`, or where the word it would split starts when that is in the last fifth of
    [`start`, `end`): a piece of text handed to an agent never ends in half a word."""
    if end >= len(text) or text[end].isspace():
        return end
    floor = max(start, end - (end - start) // 5)
    return next((i for i in range(end - 1, floor - 1, -1) if text[i].isspace()), end)


def excerpt_of(extracted: Extracted, markdown: str, limit: int) -> tuple[str, int]:
    """At most `limit` characters of `markdown` (`to_markdown(extracted)`) from its first
    page section (the title is a field of its own), ended at a word's end (`word_end`), and
    the offset in `markdown` where reading on continues (its length when only blank space is
    left); the excerpt is `markdown[start:end]` without its trailing space."""
    start = len(_title_line(extracted)) + 1 if extracted.title else 0
    end = word_end(markdown, start, min(len(markdown), start + limit))
    if not markdown[end:].strip():
        end = len(markdown)
    return markdown[start:end].rstrip(), end


def write_beside(original: Path, text: str) -> Path:
    """`text` saved as the Markdown of `original` (`markdown_path`), whole or not at all."""
    # Whole or absent (a rename), but not synced: the Markdown is derived from the original
    # and read_document writes it again when it is missing or empty, so a crash costs a
    # re-read, while an fsync per document would cost more than reading its pages.
    target = markdown_path(original)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        # private like every file of the cache (0600), never through a link planted there
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def digest_document(path: Path, config: DigestConfig, extractor: Extractor) -> StageOutcome:
    """Digest the document at `path`: done with its title, page counts, an excerpt and the
    Markdown's path, or degraded/failed with the outcome code of what stopped it."""
    try:
        if path.stat().st_size == 0:
            raise DocumentError(Outcome.EMPTY_DOCUMENT, "the document is empty (0 bytes)")
        extracted = extractor.extract(path, config)
        if extracted.pages == 0:
            raise DocumentError(Outcome.EMPTY_DOCUMENT, "the document has no pages")
        markdown = to_markdown(extracted)
        if not any(extracted.texts):
            raise DocumentError(
                Outcome.EMPTY_DOCUMENT,
                f"no text on the {len(extracted.texts)} pages read "
                f"(OCR reads at most {config.ocr_pages} scanned pages)",
            )
        saved = write_beside(path, markdown)
    except (DocumentError, ExtractorFailed) as exc:
        return StageOutcome(Status.DEGRADED, reason=str(exc)[:500], outcome=exc.outcome)
    except OSError as exc:
        return StageOutcome(
            Status.FAILED, reason=f"{type(exc).__name__}: {exc}"[:500], outcome=outcome_of(exc)
        )
    excerpt, excerpt_end = excerpt_of(extracted, markdown, config.excerpt_chars)
    output: dict[str, Any] = {
        "title": extracted.title,
        "pages": extracted.pages,
        "pages_read": len(extracted.texts),
        "chars": len(markdown),  # of the Markdown: what read_file and read_document count
        "truncated": extracted.truncated,
        "excerpt": excerpt,
        "excerpt_end": excerpt_end,
        "markdown": str(saved),
        "extractor": extracted.reader or extractor.name,
        "peak_kib": extracted.peak_kib,
        "ocr_pages": list(extracted.ocr_pages),
    }
    return StageOutcome(Status.DONE, output)
