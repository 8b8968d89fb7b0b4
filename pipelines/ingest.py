"""One MCP tool result -> RenderedResult + the jobs it needs. Never raises for a bad block."""

from __future__ import annotations

import re
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
from pipelines.cache import MediaCache, Validator, safe_mime
from pipelines.document_kinds import sniff
from pipelines.media import (
    BlobError,
    Capability,
    JobRequest,
    Marker,
    MarkerReason,
    MediaKind,
    StoredBlob,
)
from pipelines.proven import ProvenFormats
from pipelines.render import RenderedResult
from pipelines.sniff import WAV, Format, ImageCheckError, sniff_audio, verify_image

JOB_FOR_KIND: Mapping[MediaKind, Capability] = {
    MediaKind.IMAGE: Capability.VISION_SUMMARIZE,
    MediaKind.AUDIO: Capability.AUDIO_TRANSCRIBE,
}
# Documents get a digest when they are a kind a digest reads (`digestible`).
ALL_CAPABILITIES = frozenset({*JOB_FOR_KIND.values(), Capability.DOCUMENT_DIGEST})
# What this process's checks below (validate_image, validate_audio) accepted, by sha256: a
# tool that returns the same screenshot on every call has it decoded and written once.
PROVEN: Mapping[MediaKind, ProvenFormats] = {
    MediaKind.IMAGE: ProvenFormats(),
    MediaKind.AUDIO: ProvenFormats(),
}


# Decoded bytes of one blob a `known_only` ingest hashes to find it (see NeedsWork).
KNOWN_ONLY_BYTES = 512 * 1024


class NeedsWork(Exception):
    """A `known_only` ingest met a block whose bytes must be written or decoded (new, too
    large to hash in passing, a document): ingest the result in full, off the event loop."""


def ingest(
    result: str | bytes | Mapping[str, Any],
    *,
    cache: MediaCache,
    server: str | None = None,
    capabilities: Collection[Capability] = ALL_CAPABILITIES,
    known_only: bool = False,
) -> RenderedResult:
    """Parse, cache and render one CallToolResult.

    Raises InvalidToolResult only when the input is not a tool result at all; every
    per-block failure becomes a marker in the text and in `markers`. `known_only`: every
    media block must be one already proved and cached (a hash of at most KNOWN_ONLY_BYTES,
    a stat), else NeedsWork is raised before anything is written.
    """
    parsed = parse_tool_result(result)
    return _Ingestion(cache, server, capabilities, known_only).run(parsed)


class _Ingestion:
    def __init__(
        self,
        cache: MediaCache,
        server: str | None,
        capabilities: Collection[Capability],
        known_only: bool = False,
    ) -> None:
        self.cache = cache
        self.known_only = known_only
        self.server = server
        self.capabilities = capabilities
        self.lines: list[str] = []
        self.media: list[StoredBlob] = []
        self.media_blocks: list[int] = []
        self.markers: list[Marker] = []
        self.jobs: dict[tuple[Capability, str], JobRequest] = {}
        self._cache_path = re.compile(re.escape(str(cache.root)) + r"[^\s'\"]*")
        self.links: list[tuple[int, ResourceLink]] = []

    def run(self, parsed: ToolResult) -> RenderedResult:
        for index, block in enumerate(parsed.content):
            try:
                self._block(index, block)
            except NeedsWork:
                raise
            except BlobError as exc:
                self._mark(index, _block_type(block), exc.reason, exc.message)
            except Exception as exc:  # fail-open: one bad block never loses the others
                self._mark(
                    index,
                    _block_type(block),
                    MarkerReason.CACHE_ERROR,
                    f"cache error: {type(exc).__name__}: {exc}",
                )
        text = "\n".join(self.lines)
        if parsed.is_error and not text.strip():
            text = render.ERROR_FALLBACK
        return RenderedResult(
            text=text,
            is_error=parsed.is_error,
            # Passed through (NaN/Infinity as null): typed tools return it beside a text copy
            # of itself, and an SDK client with an output schema requires it.
            structured_content=render.json_safe(parsed.structured_content),
            media=tuple(self.media),
            markers=tuple(self.markers),
            jobs=tuple(self.jobs.values()),
            media_blocks=tuple(self.media_blocks),
            links=tuple(self.links),
        )

    def _block(self, index: int, block: Block) -> None:
        match block:
            case TextBlock(text=text):
                self.lines.append(render.clean_text(text))
            case ImageBlock(data=data, mime=mime):
                stored = self._store(data, MediaKind.IMAGE, mime, image_validator(index, mime))
                self._add_media(index, stored)
            case AudioBlock(data=data, mime=mime):
                stored = self._store(data, MediaKind.AUDIO, mime, validate_audio)
                self._add_media(index, stored)
            case EmbeddedText(uri=uri, mime=mime, text=text):
                if text:
                    self.lines.append(render.embedded_text_header(uri, mime))
                    self.lines.append(render.clean_text(text))
                else:
                    self.lines.append(render.empty_resource(uri))
            case EmbeddedBlob(uri=uri, mime=mime, blob=blob):
                kind = media_kind_of(mime)
                if kind is MediaKind.DOCUMENT:
                    if self.known_only:
                        raise NeedsWork(f"block {index} is a document to write")
                    stored = self.cache.store_base64(blob, kind, mime=mime, uri=uri)
                    self.media.append(stored)
                    self.media_blocks.append(index)
                    self.lines.append(render.saved_document(stored))
                    self._add_digest(stored)
                else:  # an embedded image or clip is media like any other: summary, transcript
                    check = (
                        image_validator(index, mime) if kind is MediaKind.IMAGE else validate_audio
                    )
                    stored = self._store(blob, kind, mime, check, uri)
                    self.lines.append(render.embedded_text_header(uri, mime))
                    self._add_media(index, stored)
            case ResourceLink():
                self.lines.append(render.resource_link(block, self.server))
                self.links.append((index, block))
            case UnknownBlock(type=kind, problem=problem):
                self._mark(
                    index,
                    kind,
                    MarkerReason.UNSUPPORTED_BLOCK,
                    f"{problem} ({render.one_line(kind)[:40]})",
                )

    def _store(
        self, data: str, kind: MediaKind, mime: str | None, check: Validator, uri: str | None = None
    ) -> StoredBlob:
        if not self.known_only:
            return self.cache.store_base64(
                data, kind, mime=mime, uri=uri, validate=check, proven=PROVEN[kind]
            )
        found = self.cache.find_proven(data, kind, PROVEN[kind], KNOWN_ONLY_BYTES)
        if found is None:
            raise NeedsWork(f"a {kind.value} block not proved and cached yet")
        return found

    def _add_media(self, index: int, stored: StoredBlob) -> None:
        self.media.append(stored)
        self.media_blocks.append(index)
        self.lines.append(render.media_tag(stored))
        capability = JOB_FOR_KIND[stored.kind]
        if capability in self.capabilities:
            key = (capability, stored.sha256)
            self.jobs.setdefault(key, JobRequest(capability, stored.sha256, stored.path))

    def _add_digest(self, stored: StoredBlob) -> None:
        capability = Capability.DOCUMENT_DIGEST
        if capability in self.capabilities and digestible(stored.path):
            key = (capability, stored.sha256)
            self.jobs.setdefault(key, JobRequest(capability, stored.sha256, stored.path))

    def _mark(self, index: int, block_type: str, reason: MarkerReason, message: str) -> None:
        # A message must never name a file of the cache (a temp file is gone by now).
        message = self._cache_path.sub(f"block {index}", message)
        found = Marker(block=index, reason=reason, message=message)
        self.markers.append(found)
        self.lines.append(render.marker(found, render.one_line(block_type)[:40]))


def validate_image(path: Path, head: bytes, name: str = "the file") -> Format:
    try:
        return verify_image(path, head, name=name)
    except ImageCheckError as exc:
        raise BlobError(MarkerReason.NOT_IMAGE, str(exc)) from None


def digestible(path: Path) -> bool:
    """A document the digest reads (PDF, DOCX, PPTX, XLSX, HTML, text), by its bytes,
    whatever its MIME type said (`document_kinds.sniff`)."""
    return sniff(path) is not None


def media_kind_of(mime: str | None) -> MediaKind:
    """What an embedded resource's MIME type says it is: image, audio, or a document."""
    major = (mime or "").partition("/")[0].strip().lower()
    if major == "image":
        return MediaKind.IMAGE
    if major == "audio":
        return MediaKind.AUDIO
    return MediaKind.DOCUMENT


def image_validator(index: int, mime: str | None) -> Validator:
    """Checks the image of block `index`; its errors name the block, not the temp file."""
    name = f"block {index} ({safe_mime(mime)})"
    return lambda path, head: validate_image(path, head, name)


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
