"""The upstream of the proxy latency bench: `ping` (text only) and `screenshot` (one PNG of
about 20 KB, the same bytes every call, made once at start so a call costs only the protocol).

    python -m bench.mcp_upstream          # stdio
"""

from __future__ import annotations

import base64
import io

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from PIL import Image, ImageDraw


def screenshot_png(rows: int = 10) -> bytes:
    """An 800x600 terminal-like screenshot: flat colours and `rows` lines of text (~20 KB)."""
    image = Image.new("RGB", (800, 600), (246, 247, 249))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 800, 24), fill=(40, 44, 52))
    draw.text((10, 6), "terminal - build log", fill="white")
    for row in range(rows):
        line = f"{row:3d}  build #{row * 37} passed in {row * 1.7:.1f} s  ok  " * 2
        draw.text((10, 30 + row * 14), line, fill=(20, 20, 20))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


SCREENSHOT = base64.b64encode(screenshot_png()).decode()
server = MCPServer("latency-bench")


@server.tool()
def ping() -> str:
    """Answers `pong`: a text-only result, passed through untouched."""
    return "pong"


@server.tool()
def screenshot() -> types.CallToolResult:
    """A caption and a ~20 KB PNG: cached by the proxy, its summary looked up."""
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Here is the screen."),
            types.ImageContent(type="image", data=SCREENSHOT, mime_type="image/png"),
        ]
    )


if __name__ == "__main__":
    server.run()
