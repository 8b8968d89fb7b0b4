"""A CallToolResult rewritten for the model: each media block as a policy says, nothing dropped.

The MCP door (proxy, interceptor) forwards tool results through here after ingest:

- images and audio: `keep` forwards the block and adds a text block with its `MEDIA:` path and
  summary or transcript; `text` replaces the bytes with that text (for text-only models);
  `link` replaces them with a resource link to `mcp-media://media/<sha256>` plus that text;
- embedded blobs larger than `inline_max` bytes become a resource link plus their saved path;
- a block ingest could not use is forwarded as it came, followed by its marker;
- text, embedded text, resource links, `structuredContent`, `isError` and `_meta` pass
  through unchanged.

The output is wire JSON (camelCase), whatever spelling came in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pipelines.blocks import unwrap_result
from pipelines.media import MediaKind, StoredBlob
from pipelines.render import RenderedResult, marker, media_tag, one_line, saved_document

MEDIA_URI_PREFIX = "mcp-media://media/"
DEFAULT_INLINE_MAX = 1024 * 1024


class MediaPolicy(StrEnum):
    KEEP = "keep"
    TEXT = "text"
    LINK = "link"


@dataclass(frozen=True, slots=True)
class RewritePolicy:
    images: MediaPolicy = MediaPolicy.KEEP
    audio: MediaPolicy = MediaPolicy.KEEP
    inline_max: int = DEFAULT_INLINE_MAX  # embedded blobs above this become links


def media_uri(sha256: str) -> str:
    return f"{MEDIA_URI_PREFIX}{sha256}"


def rewrite_result(
    original: Mapping[str, Any],
    rendered: RenderedResult,
    notes: Mapping[str, list[str]],
    policy: RewritePolicy,
) -> dict[str, Any]:
    """The CallToolResult (wire JSON) the model receives instead of `original`.

    `original` is the tool result as received (a JSON-RPC wrapper is looked through);
    `notes` are the lines to show under each media sha256 (summaries, transcripts, or
    "still running" lines), as `pipelines.render.job_notes` builds them.
    """
    result = unwrap_result(original)
    blocks = result.get("content")
    content = blocks if isinstance(blocks, list) else []
    stored = dict(zip(rendered.media_blocks, rendered.media, strict=True))
    marked = {m.block: m for m in rendered.markers}
    out: list[Any] = []
    for index, block in enumerate(content):
        blob = stored.get(index)
        if blob is not None:
            out += _media_block(block, blob, notes.get(blob.sha256, []), policy)
        else:
            out.append(block)
        if index in marked:
            kind = block.get("type") if isinstance(block, Mapping) else None
            out.append(_text(marker(marked[index], one_line(str(kind))[:40])))
    rewritten: dict[str, Any] = {"content": out}
    for camel, snake in (
        ("structuredContent", "structured_content"),
        ("isError", "is_error"),
        ("_meta", "meta"),
    ):
        if camel in result or snake in result:
            rewritten[camel] = result[camel] if camel in result else result[snake]
    return rewritten


def rewrap(original: Mapping[str, Any], rewritten: dict[str, Any]) -> dict[str, Any]:
    """`rewritten` put back inside the JSON-RPC wrappers `original` came in, if any."""
    if original.get("content") is None and isinstance(original.get("result"), Mapping):
        return {**original, "result": rewrap(original["result"], rewritten)}
    return rewritten


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _link(blob: StoredBlob) -> dict[str, Any]:
    return {
        "type": "resource_link",
        "uri": media_uri(blob.sha256),
        "name": blob.path.name,
        "mimeType": blob.mime,
        "size": blob.size,
    }


def _media_block(
    block: Any, blob: StoredBlob, lines: list[str], policy: RewritePolicy
) -> list[dict[str, Any]]:
    if blob.kind is MediaKind.DOCUMENT:
        saved = _text(saved_document(blob))
        if blob.size > policy.inline_max:
            return [_link(blob), saved]
        return [_wire(block), saved]
    chosen = policy.images if blob.kind is MediaKind.IMAGE else policy.audio
    about = _text("\n".join([media_tag(blob), *lines]))
    match chosen:
        case MediaPolicy.KEEP:
            return [_wire(block), about]
        case MediaPolicy.LINK:
            return [_link(blob), about]
        case MediaPolicy.TEXT:
            return [about]


_WIRE_NAMES = {"mime_type": "mimeType"}


def _wire(value: Any) -> Any:
    """A block in wire spelling (SDK 2.x dumps use snake_case field names)."""
    if isinstance(value, Mapping):
        return {_WIRE_NAMES.get(k, k): _wire(v) for k, v in value.items()}
    return value
