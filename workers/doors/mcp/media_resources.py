"""The cache's images and audio as MCP resources: `mcp-media://media/<sha256>`, listed most
recent first a page at a time, and the template that names any of them.

Documents are not listed: their files are named by a hash prefix, so listing them would mean
hashing each one; their links (handed out in results) read back all the same.
"""

from __future__ import annotations

import heapq
import mimetypes
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import mcp_types as types
from mcp.shared.exceptions import MCPError

from pipelines.cache import CachedFile, MediaCache
from pipelines.media import MediaKind
from pipelines.rewrite import MEDIA_URI_PREFIX, media_uri

PAGE_SIZE = 50
MAX_LISTED = 1000  # the most recent this many; older media stay readable by their URI
CURSOR_PREFIX = "mcp-media:"

TEMPLATE = types.ResourceTemplate(
    name="cached media",
    uri_template=f"{MEDIA_URI_PREFIX}{{sha256}}",
    description="An image or audio clip mcp-media cached from a tool result or made (speak), "
    "by the sha256 of its bytes (each MEDIA: file's name)",
)


def media_page(
    cache: MediaCache, cursor: str | None, before: Sequence[types.Resource] = ()
) -> types.ListResourcesResult:
    """One page of cached media after `cursor` (None: the first page, after `before`)."""
    position = _parse(cursor) if cursor else None
    skipped = position[0] if position else 0
    if skipped >= MAX_LISTED:
        return types.ListResourcesResult(resources=list(before))
    newest = heapq.nlargest(
        PAGE_SIZE + 1,
        (f for f in _stored(cache) if position is None or _order(f) < position[1:]),
        key=_order,
    )
    room = min(PAGE_SIZE, MAX_LISTED - skipped)
    page, more = newest[:room], len(newest) > room and skipped + room < MAX_LISTED
    resources = [*before, *(_resource(f) for f in page)]
    next_cursor = None
    if more and page:
        mtime_ns, sha = _order(page[-1])
        next_cursor = f"{CURSOR_PREFIX}{skipped + len(page)}:{mtime_ns}:{sha}"
    return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)


def _stored(cache: MediaCache) -> Iterator[CachedFile]:
    for kind in (MediaKind.IMAGE, MediaKind.AUDIO):
        yield from cache.iter_stored(kind)


def _order(found: CachedFile) -> tuple[int, str]:
    return int(found.mtime * 1e9), found.sha256


def _parse(cursor: str) -> tuple[int, int, str]:
    try:
        if not cursor.startswith(CURSOR_PREFIX):
            raise ValueError(cursor)
        count, mtime_ns, sha = cursor.removeprefix(CURSOR_PREFIX).split(":")
        return int(count), int(mtime_ns), sha
    except ValueError:
        raise MCPError(
            types.INVALID_PARAMS, f"resources/list: unknown cursor {cursor[:80]!r}"
        ) from None


def _resource(found: CachedFile) -> types.Resource:
    mime = mimetypes.guess_type(found.path.name)[0] or "application/octet-stream"
    when = datetime.fromtimestamp(found.mtime, UTC).isoformat(timespec="seconds")
    return types.Resource(
        uri=media_uri(found.sha256),
        name=found.path.name,
        title=f"cached {found.kind.value}",
        mime_type=mime,
        size=found.size,
        annotations=types.Annotations(last_modified=when),
    )
