"""CallToolResults exactly as the official MCP SDK produces them: a real `MCPServer` whose
tools return typed output, errors with media and embedded resources, called in-process by a
real `Client`, dumped as 2.x snake_case and as camelCase wire JSON (what SDK 1.x reads)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from tests.support.factories import png_bytes, wav_bytes


class Rows(BaseModel):
    rows: list[int]
    ok: bool


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build_server() -> MCPServer:
    server = MCPServer("sdk-results")

    @server.tool()
    def typed_rows() -> Rows:
        """Typed output: the SDK adds structured content and a text copy of it."""
        return Rows(rows=[1, 2], ok=True)

    @server.tool()
    def error_with_image() -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="render failed"),
                types.ImageContent(type="image", data=_b64(png_bytes()), mime_type="image/png"),
            ],
            is_error=True,
        )

    @server.tool()
    def embedded_media() -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="screen://shot/1", mime_type="image/png", blob=_b64(png_bytes())
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="mic://clip/1", mime_type="audio/wav", blob=_b64(wav_bytes())
                    ),
                ),
            ]
        )

    @server.tool()
    def embedded_text() -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="file:///notes/todo.md", mime_type="text/markdown", text="- ship it"
                    ),
                )
            ]
        )

    return server


async def _call_all(names: list[str]) -> dict[str, types.CallToolResult]:
    async with Client(build_server()) as client:
        return {name: await client.call_tool(name, {}) for name in names}


TOOLS = ["typed_rows", "error_with_image", "embedded_media", "embedded_text"]


def dumps() -> dict[str, dict[str, dict[str, Any]]]:
    """{tool: {"2.x": snake_case dict, "1.x": camelCase dict}} from one real call each."""
    results = asyncio.run(_call_all(TOOLS))
    return {
        name: {
            "2.x": result.model_dump(mode="json", exclude_none=True),
            "1.x": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for name, result in results.items()
    }
