"""A CallToolResult rewritten for the model: each media block as a policy says, nothing dropped.

The MCP door (proxy, interceptor) forwards tool results through here after ingest:

- images and audio: `keep` forwards the block and adds a text block with its `MEDIA:` path and
  summary or transcript (the path left out when `tag_sent` is off: a client that caches the
  blocks it receives writes its own `MEDIA:` line, and one image would have two);
  `text` replaces the bytes with that text (for text-only models);
  `link` replaces them with a resource link to `mcp-media://media/<sha256>` plus that text;
- images under `fit` (`pipelines.fit`): forwarded as they came when within the limits, else
  as a downscaled, re-encoded copy, plus that text and a line saying so (an image no copy
  can be made of becomes a link); then, while the result is over its byte cap, its largest
  cached blocks (images, audio, embedded blobs) become links;
- every block put in a media block's place keeps that block's `annotations` and `_meta`;
- embedded blobs larger than `inline_max` bytes become a resource link plus their saved path;
- a block ingest could not use is forwarded as it came, followed by its marker;
- text, embedded text, resource links, `structuredContent`, `isError` and `_meta` pass
  through unchanged.

The output is wire JSON (camelCase), whatever spelling came in.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pipelines.blocks import unwrap_result
from pipelines.fit import FitLimits, FittedImage, fit_image
from pipelines.fit_cache import FittedCopies
from pipelines.imaging import ImageError
from pipelines.media import MediaKind, StoredBlob
from pipelines.render import RenderedResult, marker, media_tag, one_line, saved_document

MEDIA_URI_PREFIX = "mcp-media://media/"
ENVELOPE_BYTES = 128  # {"jsonrpc":"2.0","id":...,"result":...} around a result
DEFAULT_INLINE_MAX = 1024 * 1024


class MediaPolicy(StrEnum):
    KEEP = "keep"
    TEXT = "text"
    LINK = "link"
    FIT = "fit"  # images only: see pipelines.fit


@dataclass(frozen=True, slots=True)
class RewritePolicy:
    images: MediaPolicy = MediaPolicy.KEEP
    audio: MediaPolicy = MediaPolicy.KEEP
    inline_max: int = DEFAULT_INLINE_MAX  # embedded blobs above this become links
    fit: FitLimits = field(default_factory=FitLimits)  # the limits of `fit`
    # Our `MEDIA:` line under an image or audio block the client receives as such (keep,
    # fit); off for a client that caches those blocks and writes its own line for each.
    tag_sent: bool = True


class SentMediaTag(StrEnum):
    """When the door writes `tag_sent`: for every client, for none, or (auto) for every
    client but those known to write their own `MEDIA:` line for the media they receive."""

    AUTO = "auto"
    ALWAYS = "always"
    OMIT = "omit"


def media_uri(sha256: str) -> str:
    return f"{MEDIA_URI_PREFIX}{sha256}"


def rewrite_result(
    original: Mapping[str, Any],
    rendered: RenderedResult,
    notes: Mapping[str, list[str]],
    policy: RewritePolicy,
    copies: FittedCopies | None = None,
    linked: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """The CallToolResult (wire JSON) the model receives instead of `original`.

    `original` is the tool result as received (a JSON-RPC wrapper is looked through);
    `notes` are the lines to show under each media sha256 (summaries, transcripts, or
    "still running" lines), as `pipelines.render.job_notes` builds them. `copies`: where
    `fit` keeps the copies it made, to send them again without encoding them again.
    `linked`: the indexes of blocks the client gets as the resource link they were read
    for: never sent as such, so their `MEDIA:` line is written whatever `tag_sent` says.
    """
    result = unwrap_result(original)
    blocks = result.get("content")
    content = blocks if isinstance(blocks, list) else []
    stored = dict(zip(rendered.media_blocks, rendered.media, strict=True))
    marked = {m.block: m for m in rendered.markers}
    out: list[Any] = []
    movable: list[_Movable] = []  # blocks carrying a cached blob's bytes
    for index, block in enumerate(content):
        blob = stored.get(index)
        if blob is not None:
            told = replace(policy, tag_sent=True) if index in linked else policy
            made = _media_block(block, blob, notes.get(blob.sha256, []), told, copies)
            about = len(made) > 1 and made[-1].get("type") == "text"
            movable += [
                _Movable(len(out) + i, blob, about) for i, b in enumerate(made) if _carries_bytes(b)
            ]
            out += made
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
    if policy.images is MediaPolicy.FIT:
        _within(rewritten, movable, policy.fit.max_result_bytes, policy.tag_sent)
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


def _carried(block: Any, replacement: dict[str, Any]) -> dict[str, Any]:
    """`replacement` with the `annotations` and `_meta` of the block it stands for."""
    if not isinstance(block, Mapping):
        return replacement
    out = dict(replacement)
    for wire, names in (("annotations", ("annotations",)), ("_meta", ("_meta", "meta"))):
        value = next((block[n] for n in names if block.get(n) is not None), None)
        if value is not None:
            out[wire] = _wire(value)
    return out


def _media_block(
    block: Any,
    blob: StoredBlob,
    lines: list[str],
    policy: RewritePolicy,
    copies: FittedCopies | None = None,
) -> list[dict[str, Any]]:
    if blob.kind is MediaKind.DOCUMENT:
        saved = _text("\n".join([saved_document(blob), *lines]))  # its digest under it
        if blob.size > policy.inline_max:
            return [_carried(block, _link(blob)), saved]
        return [_wire(block), saved]
    chosen = policy.images if blob.kind is MediaKind.IMAGE else policy.audio
    if chosen is MediaPolicy.FIT and blob.kind is MediaKind.IMAGE:
        return _fitted(block, blob, lines, policy, copies)
    about = _text("\n".join([media_tag(blob), *lines]))
    match chosen:
        case MediaPolicy.LINK:
            return [_carried(block, _link(blob)), about]
        case MediaPolicy.TEXT:
            return [_carried(block, about)]
        case _:
            return [_wire(block), *_about_sent(blob, lines, policy)]


def _about_sent(blob: StoredBlob, lines: list[str], policy: RewritePolicy) -> list[dict[str, Any]]:
    """The text block under a media block sent as such: none when it would say nothing."""
    told = [media_tag(blob), *lines] if policy.tag_sent else lines
    return [_text("\n".join(told))] if told else []


def _fitted(
    block: Any,
    blob: StoredBlob,
    lines: list[str],
    policy: RewritePolicy,
    copies: FittedCopies | None,
) -> list[dict[str, Any]]:
    """The image as it came when it fits, else a copy that does; a link if neither can be."""
    limits = policy.fit
    try:
        copy: FittedImage | None = (
            copies.fit(blob.path, blob.sha256, blob.mime, limits)
            if copies is not None
            else fit_image(blob.path, blob.mime, limits)
        )
    except (ImageError, OSError) as exc:
        why = one_line(str(exc), 200)
        about = _text("\n".join([media_tag(blob), *lines, f"[image not sent: {why}]"]))
        return [_carried(block, _link(blob)), about]
    if copy is None:
        return [_wire(block), *_about_sent(blob, lines, policy)]
    image = {"type": "image", "data": base64.b64encode(copy.data).decode(), "mimeType": copy.mime}
    return [_carried(block, image), *_about_sent(blob, [*lines, copy.note()], policy)]


def _carries_bytes(block: Mapping[str, Any]) -> bool:
    if block.get("type") in ("image", "audio"):
        return True
    resource = block.get("resource")
    return block.get("type") == "resource" and isinstance(resource, Mapping) and "blob" in resource


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True, slots=True)
class _Movable:
    """A block carrying a cached blob's bytes, at `index`; `about`: our text block follows."""

    index: int
    blob: StoredBlob
    about: bool


def _within(result: dict[str, Any], movable: list[_Movable], cap: int, tag_sent: bool) -> None:
    """Move the largest blocks carrying cached bytes to links until `result` fits `cap`
    bytes of JSON (with room for the JSON-RPC envelope). A medium sent without our `MEDIA:`
    line (`tag_sent` off) gets it back once it is a link: the client has no file of it now."""
    content = result["content"]
    total = _size(result) + ENVELOPE_BYTES
    by_size = sorted(movable, key=lambda item: _size(content[item.index]), reverse=True)
    tag_after: list[tuple[int, StoredBlob]] = []  # a text block of its tag to insert
    for item in by_size:
        if total <= cap:
            break
        index, blob = item.index, item.blob
        before = _size(content[index])
        content[index] = _carried(content[index], _link(blob))
        total += _size(content[index]) - before
        untagged = not tag_sent and blob.kind is not MediaKind.DOCUMENT
        if item.about:
            total += _say_linked(content, index + 1, blob, cap, untagged)
        elif untagged:
            tag_after.append((index, blob))
            total += _size(_text(media_tag(blob))) + 1
    for index, blob in sorted(tag_after, key=lambda pair: pair[0], reverse=True):
        content.insert(index + 1, _text(media_tag(blob)))


def _say_linked(content: list[Any], after: int, blob: StoredBlob, cap: int, untagged: bool) -> int:
    """The text under a block moved to a link says so, not what `fit` sent before the move,
    and starts with the blob's `MEDIA:` line if it did not (`untagged`).
    Returns the change in the result's size."""
    about = content[after]
    lines = str(about.get("text", "")).split("\n")
    moved = (
        f"[image sent as a link: the result was over its {cap}-byte cap; read_resource "
        f"{media_uri(blob.sha256)} gives the original]"
    )
    told = [moved if line.startswith(FittedImage.NOTE_START) else line for line in lines]
    if untagged:
        told = [media_tag(blob), *told]
    if told == lines:
        return 0
    before = _size(about)
    content[after] = {**about, "text": "\n".join(told)}
    return _size(content[after]) - before


_WIRE_NAMES = {"mime_type": "mimeType"}


def _wire(value: Any) -> Any:
    """A block in wire spelling (SDK 2.x dumps use snake_case field names)."""
    if isinstance(value, Mapping):
        return {_WIRE_NAMES.get(k, k): _wire(v) for k, v in value.items()}
    return value
