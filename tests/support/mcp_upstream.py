"""An MCP server for the proxy tests: the bundled example's tools plus tools that misbehave.

python -m tests.support.mcp_upstream [--name NAME]
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from examples.mcp_server import server
from tests.support.factories import b64, png_bytes, wav_bytes


@server.tool()
def error_with_image() -> types.CallToolResult:
    """A failed render that still returns its screenshot."""
    data = base64.b64encode(png_bytes()).decode()
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="render failed"),
            types.ImageContent(type="image", data=data, mime_type="image/png"),
        ],
        is_error=True,
    )


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, then answers."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        await anyio.sleep(0.05)
    return f"done after {steps} steps"


@server.tool()
def crash() -> str:
    """Ends the server process in the middle of a call."""
    os._exit(3)


@server.tool()
def who() -> str:
    """Which server answered (its --name)."""
    return NAME


@server.tool()
def refuse() -> str:
    """Raises a tool error: the SDK turns it into an isError result with its message."""
    raise ToolError("refused on purpose")


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def hang_until_cancelled(marker: str) -> str:
    """Never answers; writes `marker` when its call is cancelled."""
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
    return "unreachable"


@server.tool()
def garbage() -> str:
    """Writes lines that are not JSON-RPC on the protocol stream, then answers."""
    sys.stdout.write('this is not json\n{"jsonrpc": "2.0", "id": "nobody"}\n')
    sys.stdout.flush()
    return "still here"


@server.tool()
def huge(megabytes: int) -> types.CallToolResult:
    """An image block of `megabytes` MiB of base64 (not an image at all)."""
    data = base64.b64encode(b"\0" * (megabytes * 1024 * 1024)).decode()
    return types.CallToolResult(
        content=[types.ImageContent(type="image", data=data, mime_type="image/png")]
    )


@server.tool()
def embedded_audio() -> types.CallToolResult:
    """A voice clip embedded as a resource (a WAV blob), not as an audio block."""
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="The clip."),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="mic://clips/1.wav", mime_type="audio/wav", blob=b64(wav_bytes())
                ),
            ),
        ]
    )


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool named `name` and tells the client the tool list changed."""

    def added() -> str:
        return f"{name} was added"

    server.add_tool(added, name=name, description="Added at run time.")
    await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
    await ctx.session.send_tool_list_changed()  # clients of earlier protocol versions
    return f"added {name}"


@server.resource("drive://files/{name}")
def drive_file(name: str) -> str:
    """A file of the drive, by name (a resource template)."""
    return f"contents of {name}"


@server.prompt()
def review(path: str, tone: str = "short") -> str:
    """Ask for a review of one file."""
    return f"Review {path}, {tone}."


NAME = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "upstream"

if __name__ == "__main__":
    server.run()
