"""One MCP tool result -> RenderedResult + the jobs it needs. Never raises for a bad block."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pipelines import render
from pipelines.audio_headers import HEADER_BYTES, wav_problem
from pipelines.blocks import (
    AudioBlock,
    Block,
    EmbeddedBlob,
    EmbeddedText,
    ImageBlock,
    ResourceLink,
    TextBlock,
    ToolResult,
    UnknownBlock,
    parse_tool_result,
)
from pipelines.cache import BlobError, MediaCache
from pipelines.media import Capability, JobRequest, Marker, MarkerReason, MediaKind, StoredBlob
from pipelines.render import RenderedResult
from pipelines.sniff import WAV, Format, ImageCheckError, sniff_audio, verify_image

JOB_FOR_KIND: Mapping[MediaKind, Capability] = {
    MediaKind.IMAGE: Capability.VISION_SUMMARIZE,
    MediaKind.AUDIO: Capability.AUDIO_TRANSCRIBE,
}
ALL_CAPABILITIES = frozenset(JOB_FOR_KIND.values())


def ingest(
    result: str | bytes | Mapping[str, Any],
    *,
    cache: MediaCache,
    server: str | None = None,
    capabilities: Collection[Capability] = ALL_CAPABILITIES,
) -> RenderedResult:
    """Parse, cache and render one CallToolResult.

    Raises InvalidToolResult only when the input is not a tool result at all; every
    per-block failure becomes a marker in the text and in `markers`.
    """
    parsed = parse_tool_result(result)
    if parsed.is_error:
        return _render_error(parsed)
    return _Ingestion(cache, server, capabilities).run(parsed)


class _Ingestion:
    def __init__(
        self, cache: MediaCache, server: str | None, capabilities: Collection[Capability]
    ) -> None:
        self.cache = cache
        self.server = server
        self.capabilities = capabilities
        self.lines: list[str] = []
        self.media: list[StoredBlob] = []
        self.markers: list[Marker] = []
        self.jobs: dict[tuple[Capability, str], JobRequest] = {}

    def run(self, parsed: ToolResult) -> RenderedResult:
        for index, block in enumerate(parsed.content):
            try:
                self._block(index, block)
            except BlobError as exc:
                self._mark(index, _block_type(block), exc.reason, exc.message)
            except Exception as exc:  # fail-open: one bad block never loses the others
                self._mark(
                    index,
                    _block_type(block),
                    MarkerReason.CACHE_ERROR,
                    f"cache error: {type(exc).__name__}: {exc}",
                )
        return RenderedResult(
            text="\n".join(self.lines),
            is_error=False,
            structured_content=_structured(parsed),
            media=tuple(self.media),
            markers=tuple(self.markers),
            jobs=tuple(self.jobs.values()),
        )

    def _block(self, index: int, block: Block) -> None:
        match block:
            case TextBlock(text=text):
                self.lines.append(render.clean_text(text))
            case ImageBlock(data=data, mime=mime):
                stored = self.cache.store_base64(
                    data, MediaKind.IMAGE, mime=mime, validate=validate_image
                )
                self._add_media(stored)
            case AudioBlock(data=data, mime=mime):
                stored = self.cache.store_base64(
                    data, MediaKind.AUDIO, mime=mime, validate=validate_audio
                )
                self._add_media(stored)
            case EmbeddedText(uri=uri, text=text):
                self.lines.append(render.clean_text(text) if text else render.empty_resource(uri))
            case EmbeddedBlob(uri=uri, mime=mime, blob=blob):
                stored = self.cache.store_base64(blob, MediaKind.DOCUMENT, mime=mime, uri=uri)
                self.media.append(stored)
                self.lines.append(render.saved_document(stored))
            case ResourceLink():
                self.lines.append(render.resource_link(block, self.server))
            case UnknownBlock(type=kind, problem=problem):
                self._mark(
                    index,
                    kind,
                    MarkerReason.UNSUPPORTED_BLOCK,
                    f"{problem} ({render.one_line(kind)[:40]})",
                )

    def _add_media(self, stored: StoredBlob) -> None:
        self.media.append(stored)
        self.lines.append(render.media_tag(stored))
        capability = JOB_FOR_KIND[stored.kind]
        if capability in self.capabilities:
            key = (capability, stored.sha256)
            self.jobs.setdefault(key, JobRequest(capability, stored.sha256, stored.path))

    def _mark(self, index: int, block_type: str, reason: MarkerReason, message: str) -> None:
        found = Marker(block=index, reason=reason, message=message)
        self.markers.append(found)
        self.lines.append(render.marker(found, render.one_line(block_type)[:40]))


def validate_image(path: Path, head: bytes) -> Format:
    try:
        return verify_image(path, head)
    except ImageCheckError as exc:
        raise BlobError(MarkerReason.NOT_IMAGE, str(exc)) from None


def validate_audio(path: Path, head: bytes) -> Format:
    """A known audio container whose header (WAV: channels, rate, block align) is sane."""
    fmt = sniff_audio(head)
    if fmt is None:
        raise BlobError(MarkerReason.NOT_AUDIO, "not audio: no known audio container signature")
    if fmt is WAV:
        with path.open("rb") as fh:
            problem = wav_problem(fh.read(HEADER_BYTES), path.stat().st_size)
        if problem:
            raise BlobError(
                MarkerReason.NOT_AUDIO, f"not audio: refused before decoding: {problem}"
            )
    return fmt


def _block_type(block: Block) -> str:
    match block:
        case TextBlock():
            return "text"
        case ImageBlock():
            return "image"
        case AudioBlock():
            return "audio"
        case EmbeddedText() | EmbeddedBlob():
            return "resource"
        case ResourceLink():
            return "resource_link"
        case UnknownBlock(type=kind):
            return kind


def _render_error(parsed: ToolResult) -> RenderedResult:
    texts = [
        render.clean_text(b.text)
        for b in parsed.content
        if isinstance(b, TextBlock | EmbeddedText) and b.text.strip()
    ]
    return RenderedResult(
        text="\n".join(texts) if texts else render.ERROR_FALLBACK,
        is_error=True,
        structured_content=_structured(parsed),
    )


def _structured(parsed: ToolResult) -> Any:
    """structuredContent, unless a text block already carries the same JSON."""
    value = parsed.structured_content
    if value is None:
        return None
    for block in parsed.content:
        if isinstance(block, TextBlock):
            try:
                if json.loads(block.text) == value:
                    return None
            except (ValueError, RecursionError):
                continue
    return value
