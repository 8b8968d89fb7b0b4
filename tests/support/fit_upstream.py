"""An MCP server whose tool returns screenshots of any size, for the `fit` image policy.

python -m tests.support.fit_upstream
"""

from __future__ import annotations

import base64

import mcp_types as types
from mcp.server.mcpserver import MCPServer

from tests.support.screens import screenshot_png

server = MCPServer("screens")


@server.tool()
def screens(width: int, height: int, count: int = 1) -> types.CallToolResult:
    """`count` different screenshots of width x height, each with annotations and _meta."""
    blocks: list[types.ContentBlock] = [types.TextContent(type="text", text="The screens.")]
    for seed in range(count):
        data = base64.b64encode(screenshot_png(width, height, seed=seed)).decode()
        blocks.append(
            types.ImageContent(
                type="image",
                data=data,
                mime_type="image/png",
                annotations=types.Annotations(audience=["user"], priority=0.5),
                _meta={"example.com/screen": seed},
            )
        )
    return types.CallToolResult(content=blocks)


if __name__ == "__main__":
    server.run()
