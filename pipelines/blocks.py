"""MCP CallToolResult JSON -> typed blocks.

Accepts the camelCase JSON of MCP spec 2025-06-18 / SDK 1.x (`mimeType`, `isError`,
`structuredContent`) and the snake_case names of the 2.x SDK (`mime_type`, `is_error`,
`structured_content`). Unknown block types are kept as `UnknownBlock`, never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipelines.errors import InvalidToolResult

MAX_WRAPPERS = 4  # a JSON-RPC response wraps the result once


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ImageBlock:
    data: str
    mime: str | None


@dataclass(frozen=True, slots=True)
class AudioBlock:
    data: str
    mime: str | None


@dataclass(frozen=True, slots=True)
class EmbeddedText:
    uri: str
    mime: str | None
    text: str


@dataclass(frozen=True, slots=True)
class EmbeddedBlob:
    uri: str
    mime: str | None
    blob: str


@dataclass(frozen=True, slots=True)
class ResourceLink:
    uri: str
    name: str | None
    title: str | None
    description: str | None
    mime: str | None
    size: int | None


@dataclass(frozen=True, slots=True)
class UnknownBlock:
    """A block we cannot use: an unknown type, or a known type with malformed fields."""

    type: str
    problem: str


Block = (
    TextBlock | ImageBlock | AudioBlock | EmbeddedText | EmbeddedBlob | ResourceLink | UnknownBlock
)


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: tuple[Block, ...]
    is_error: bool
    structured_content: Any
    meta: Mapping[str, Any] | None


def _field(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_tool_result(result: str | bytes | Mapping[str, Any]) -> ToolResult:
    """Parse a CallToolResult; raises InvalidToolResult if it is not one."""
    if isinstance(result, str | bytes):
        try:
            result = json.loads(result)
        except (ValueError, RecursionError) as exc:
            raise InvalidToolResult(f"input is not JSON: {exc}") from None
    result = unwrap_result(result)
    content = result.get("content")
    if not isinstance(content, list):
        raise InvalidToolResult("input is not a CallToolResult: `content` must be a list")
    is_error = _field(result, "isError", "is_error")
    meta = result.get("_meta")
    return ToolResult(
        content=tuple(parse_block(block) for block in content),
        is_error=is_error is True,
        structured_content=_field(result, "structuredContent", "structured_content"),
        meta=meta if isinstance(meta, Mapping) else None,
    )


def unwrap_result(value: Any) -> Mapping[str, Any]:
    """The tool result inside at most MAX_WRAPPERS JSON-RPC response wrappers."""
    for _ in range(MAX_WRAPPERS + 1):
        if not isinstance(value, Mapping):
            raise InvalidToolResult("input is not a CallToolResult: expected a JSON object")
        if value.get("content") is None and isinstance(value.get("result"), Mapping):
            value = value["result"]  # a JSON-RPC response wrapping the tool result
            continue
        return value
    raise InvalidToolResult("input is not a CallToolResult: too many nested `result` objects")


def parse_block(block: Any) -> Block:
    if not isinstance(block, Mapping):
        return UnknownBlock(type=type(block).__name__, problem="block is not an object")
    kind = block.get("type")
    if not isinstance(kind, str):
        return UnknownBlock(type="(missing)", problem="block has no `type`")
    mime = _opt_str(_field(block, "mimeType", "mime_type"))
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            return UnknownBlock(type=kind, problem="text block without a `text` string")
        return TextBlock(text=text)
    if kind in ("image", "audio"):
        data = block.get("data")
        if not isinstance(data, str):
            return UnknownBlock(type=kind, problem=f"{kind} block without a `data` string")
        return ImageBlock(data, mime) if kind == "image" else AudioBlock(data, mime)
    if kind == "resource":
        return _parse_embedded(block.get("resource"))
    if kind == "resource_link":
        return _parse_link(block, mime)
    return UnknownBlock(type=kind, problem="unsupported block type")


def _parse_embedded(resource: Any) -> Block:
    if not isinstance(resource, Mapping):
        return UnknownBlock(type="resource", problem="resource block without a `resource` object")
    uri = _opt_str(resource.get("uri")) or ""
    mime = _opt_str(_field(resource, "mimeType", "mime_type"))
    text = resource.get("text")
    if isinstance(text, str):
        return EmbeddedText(uri=uri, mime=mime, text=text)
    blob = resource.get("blob")
    if isinstance(blob, str):
        return EmbeddedBlob(uri=uri, mime=mime, blob=blob)
    return UnknownBlock(type="resource", problem="embedded resource with neither text nor blob")


def _parse_link(block: Mapping[str, Any], mime: str | None) -> Block:
    uri = _opt_str(block.get("uri"))
    if not uri:
        return UnknownBlock(type="resource_link", problem="resource link without a `uri`")
    size = block.get("size")
    return ResourceLink(
        uri=uri,
        name=_opt_str(block.get("name")),
        title=_opt_str(block.get("title")),
        description=_opt_str(block.get("description")),
        mime=mime,
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
    )
