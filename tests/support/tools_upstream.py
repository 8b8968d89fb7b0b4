"""A tools-only MCP server (the SDK's low-level `Server`, no resources, no prompts), as many
servers agents use are: the proxy in front of it must answer every method it advertises.

python -m tests.support.tools_upstream

Tools: `ping` (text), `screenshot` (a caption and a small PNG), `expired` (an error result:
text, then an image), `voice` (a quarter second of WAV tone, or the WAV file named by
TOOLS_UPSTREAM_VOICE). The media are built with the standard library only, so the server
starts about as fast as an SDK server can.
"""

from __future__ import annotations

import base64
import io
import math
import os
import struct
import wave
import zlib
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

EMPTY = {"type": "object", "properties": {}}
TOOLS = [
    types.Tool(name="ping", description="Answers pong.", input_schema=EMPTY),
    types.Tool(name="screenshot", description="A caption and a PNG.", input_schema=EMPTY),
    types.Tool(name="expired", description="An error result with its image.", input_schema=EMPTY),
    types.Tool(name="voice", description="A WAV tone.", input_schema=EMPTY),
]
ERROR_TEXT = "The session expired."


def png(width: int = 24, height: int = 16) -> bytes:
    """A two-colour RGB PNG (not uniform, so it is a real picture to summarise)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(
        b"\0" + b"".join(bytes((200, 30 + x * 8, 30 + y * 10)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def wav(seconds: float = 0.25, rate: int = 16000) -> bytes:
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return out.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    image = types.ImageContent(type="image", data=_b64(png()), mime_type="image/png")
    if params.name == "screenshot":
        caption = types.TextContent(type="text", text="Here is the screen.")
        return types.CallToolResult(content=[caption, image])
    if params.name == "expired":
        error = types.TextContent(type="text", text=ERROR_TEXT)
        return types.CallToolResult(content=[error, image], is_error=True)
    if params.name == "voice":
        recorded = os.environ.get("TOOLS_UPSTREAM_VOICE")
        data = Path(recorded).read_bytes() if recorded else wav()
        sound = types.AudioContent(type="audio", data=_b64(data), mime_type="audio/wav")
        return types.CallToolResult(content=[sound])
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


server: Server[Any] = Server("tools-only", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
