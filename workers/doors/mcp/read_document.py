"""read_document: the text of a cached document, from the Markdown its digest saved beside it.

The document is named by sha256, by `mcp-media://media/<sha256>`, or by a path inside the
cache's documents folder (the document itself or its `.md`): never any other file. The
answer is a range of the text, bounded by `max_chars`: whole sections by `pages` ("3" or
"3-7": pages, slides or sheets, as the Markdown's headings count them), or the characters
from `offset`; it says where to read on. The tool (`tools.OwnTools`) runs a digest job
first when the Markdown is missing or empty.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types

from pipelines.cache import MediaCache
from pipelines.digest import markdown_path, word_end
from pipelines.media import Capability, JobRequest, MediaKind
from pipelines.render import pending_line, wrap_untrusted
from pipelines.rewrite import MEDIA_URI_PREFIX
from workers.core.gateway import JobGateway, JobHandle
from workers.doors.mcp.outcomes import job_line

DEFAULT_CHARS = 10_000
MAX_CHARS = 50_000
# The headings `pipelines.digest.to_markdown` writes, one per page, slide, sheet or text.
_SECTION = re.compile(r"^## (?:Page \d+|Slide \d+|Sheet: .*|Document|Text)$", re.M)
_PAGES = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


class DocumentRefused(ValueError):
    """The input names no cached document, or asks for a range it does not have."""


@dataclass(frozen=True, slots=True)
class CachedDocument:
    original: Path
    sha256: str

    @property
    def markdown(self) -> Path:
        return markdown_path(self.original)

    def has_text(self) -> bool:
        """The Markdown is there and not empty (it is written whole or not at all)."""
        found = self.markdown
        return found.is_file() and found.stat().st_size > 0

    def text(self) -> str:
        """The Markdown as the digest wrote it (UTF-8, no newline translation), so offsets
        are the ones its digest line counted."""
        with self.markdown.open(encoding="utf-8", newline="") as fh:
            return fh.read()


def locate(cache: MediaCache, value: Any) -> CachedDocument:
    """The cached document `value` names (see the module), or DocumentRefused."""
    if not isinstance(value, str) or not value.strip():
        raise DocumentRefused("name the document by sha256, mcp-media:// URI or cached path")
    sha = value.strip().removeprefix(MEDIA_URI_PREFIX).lower()
    if len(sha) == 64 and all(c in "0123456789abcdef" for c in sha):
        found = cache.find_document(sha)
        if found is None:
            raise DocumentRefused(f"no cached document {sha}")
        return CachedDocument(found.path, sha)
    folder = cache.folder(MediaKind.DOCUMENT).resolve()
    real = Path(value).expanduser().resolve()
    if not real.is_relative_to(folder):
        raise DocumentRefused(
            f"{value} is outside the media cache: only cached documents (under {folder}) are read"
        )
    if real.name.endswith(".md") and real.with_name(real.name[:-3]).is_file():
        real = real.with_name(real.name[:-3])
    if not real.is_file() or real.name.startswith("."):
        raise DocumentRefused(f"{value}: no such cached document")
    digest = hashlib.sha256()
    with real.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return CachedDocument(real, digest.hexdigest())


def bounded_chars(value: Any) -> int:
    if value is None:
        return DEFAULT_CHARS
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CHARS:
        raise DocumentRefused(f"max_chars must be a whole number from 1 to {MAX_CHARS}")
    return value


def page_range(value: Any) -> tuple[int, int] | None:
    """`pages` as (first, last), 1-based and inclusive; None when not given."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    match = _PAGES.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise DocumentRefused('pages must be a page number or a range such as "3-7"')
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise DocumentRefused("pages count from 1, and a range goes up: 3-7")
    return first, last


def read_range(
    text: str, pages: tuple[int, int] | None, offset: Any, max_chars: int
) -> dict[str, Any]:
    """The part of the Markdown `text` asked for, at most `max_chars` characters, and where
    the next read starts (`next_offset`, None at the end)."""
    starts = [m.start() for m in _SECTION.finditer(text)]
    count = len(starts)
    if pages is not None:
        if offset is not None:
            raise DocumentRefused("give pages or offset, not both")
        first, last = pages
        if first > count:
            raise DocumentRefused(f"the document has {count} pages (asked for {first})")
        last = min(last, count)
        begin = starts[first - 1]
        end = starts[last] if last < count else len(text)
    else:
        if offset is None:
            offset = 0
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise DocumentRefused("offset must be a whole number of characters >= 0")
        if offset > len(text):
            raise DocumentRefused(f"the text has {len(text)} characters (offset {offset})")
        begin, end = offset, len(text)
    stop = word_end(text, begin, min(end, begin + max_chars))
    return {
        "text": text[begin:stop],
        "offset": begin,
        "next_offset": stop if stop < len(text) else None,
        "total_chars": len(text),
        "pages": count,
        "truncated": stop < end,
    }


def document_result(doc: CachedDocument, part: dict[str, Any]) -> types.CallToolResult:
    """The range read, marked as the document's (untrusted) text, and where to read on."""
    where = f"characters {part['offset']}-{part['offset'] + len(part['text'])}"
    more = (
        f"; read on with offset={part['next_offset']}"
        if part["next_offset"] is not None
        else "; the end of the text"
    )
    note = f"[{where} of {part['total_chars']} ({part['pages']} pages) from {doc.markdown}{more}]"
    body = wrap_untrusted(Capability.DOCUMENT_DIGEST.value, part["text"])
    structured = {"sha256": doc.sha256, "path": str(doc.markdown), **part}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{body}\n{note}")],
        structured_content=structured,
    )


def text_here(gateway: JobGateway, doc: CachedDocument, wait: float) -> JobHandle | None:
    """Make the Markdown of `doc` readable on this machine: a digest that ran on another
    node (nodes sharing only a bucket) leaves its text beside our copy once its result is
    looked up; else the digest runs again, waited for at most `wait` seconds. The handle
    of that run; None when none was needed."""
    gateway.get(gateway.key(Capability.DOCUMENT_DIGEST, doc.sha256))
    if doc.has_text():
        return None
    return digest_again(gateway, doc, wait)


def digest_again(gateway: JobGateway, doc: CachedDocument, wait: float) -> JobHandle:
    """A digest job for `doc`, forced as reprocess forces it: run again, not answered by the
    result it had (whose Markdown is gone); waited for at most `wait` seconds."""
    job = JobRequest(Capability.DOCUMENT_DIGEST, doc.sha256, doc.original)
    (handle,) = gateway.submit([job], params={"force": True}, force=True)
    return gateway.wait([handle], wait)[0] if wait > 0 else handle


def not_read(handle: JobHandle, fetch: str) -> str:
    """Why the digest left no text: still running (and how to know when), or its end."""
    if handle.envelope is None:
        return pending_line(handle.key.capability.value, handle.id, fetch)
    return job_line(handle.envelope)
