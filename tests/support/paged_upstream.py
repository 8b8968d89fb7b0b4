"""An MCP server (the SDK's low-level `Server`) that lists in pages of two, following the
spec's cursors: tools, resources, resource templates and prompts, five of each.

python -m tests.support.paged_upstream
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

COUNT = 5
PAGE = 2


def page(params: types.PaginatedRequestParams | None) -> tuple[range, str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = min(start + PAGE, COUNT)
    return range(start, end), (str(end) if end < COUNT else None)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    shown, cursor = page(params)
    tools = [
        types.Tool(name=f"tool_{i}", input_schema={"type": "object", "properties": {}})
        for i in shown
    ]
    return types.ListToolsResult(tools=tools, next_cursor=cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    shown, cursor = page(params)
    resources = [types.Resource(uri=f"paged://resource/{i}", name=f"resource_{i}") for i in shown]
    return types.ListResourcesResult(resources=resources, next_cursor=cursor)


async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    shown, cursor = page(params)
    templates = [
        types.ResourceTemplate(uri_template=f"paged://template/{i}/{{id}}", name=f"template_{i}")
        for i in shown
    ]
    return types.ListResourceTemplatesResult(resource_templates=templates, next_cursor=cursor)


async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    shown, cursor = page(params)
    prompts = [types.Prompt(name=f"prompt_{i}") for i in shown]
    return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)


server: Server[Any] = Server(
    "paged",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_list_prompts=list_prompts,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
