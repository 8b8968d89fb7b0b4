"""An MCP server whose tools answer with resource links to resources it serves, as file and
document servers do (the SDK's low-level `Server`).

python -m tests.support.links_upstream

Resources, under the scheme LINKS_UPSTREAM_SCHEME (`docs`): `report.pdf` (a generated
two-page PDF holding REPORT_SENTENCE), `notes.txt` (text), `slow.pdf` (answered after
LINKS_UPSTREAM_SLOW seconds, 60 by default), `big.bin` (LINKS_UPSTREAM_BIG bytes, 300000 by
default), `picture.png` (a small PNG). Tools: `report`, `notes`, `slow`, `big`, `picture`,
`missing` (a link to a resource it does not have) each answer a caption and a link;
`foreign` links to LINKS_UPSTREAM_FOREIGN.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tests.support.factories import noisy_png
from tests.support.pdf_writer import build_pdf, text_pages

REPORT_SENTENCE = "The quarterly tide tables were signed by the harbour master."
NOTES_TEXT = "Buoy seven needs a new lamp before the autumn storms."
SCHEME = os.environ.get("LINKS_UPSTREAM_SCHEME", "docs")
EMPTY = {"type": "object", "properties": {}}
LINKED = {
    "report": ("report.pdf", "application/pdf"),
    "notes": ("notes.txt", "text/plain"),
    "slow": ("slow.pdf", "application/pdf"),
    "big": ("big.bin", "application/octet-stream"),
    "picture": ("picture.png", "image/png"),
    "missing": ("gone.pdf", "application/pdf"),
}
TOOLS = [
    types.Tool(name=name, description=f"A link to {file}.", input_schema=EMPTY)
    for name, (file, _) in LINKED.items()
] + [types.Tool(name="foreign", description="A link to another server's.", input_schema=EMPTY)]


def uri(file: str) -> str:
    return f"{SCHEME}://{file}"


def report_pdf() -> bytes:
    return build_pdf(text_pages(2, REPORT_SENTENCE, at=0), title="Tide Report")


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    return types.ListToolsResult(tools=TOOLS)


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    served = [(file, mime) for file, mime in LINKED.values() if file != "gone.pdf"]
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri(file), name=file, mime_type=mime) for file, mime in served
        ]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
    asked = str(params.uri)
    if asked == uri("notes.txt"):
        text = types.TextResourceContents(uri=asked, mime_type="text/plain", text=NOTES_TEXT)
        return types.ReadResourceResult(contents=[text])
    if asked == uri("big.bin"):
        data = os.urandom(int(os.environ.get("LINKS_UPSTREAM_BIG", "300000")))
    elif asked in (uri("report.pdf"), uri("slow.pdf")):
        if asked == uri("slow.pdf"):
            await anyio.sleep(float(os.environ.get("LINKS_UPSTREAM_SLOW", "60")))
        data = report_pdf()
    elif asked == uri("picture.png"):
        data = noisy_png(7)
    else:
        raise MCPError(-32002, f"resource not found: {asked}")
    mime = next((m for f, m in LINKED.values() if uri(f) == asked), "application/octet-stream")
    blob = types.BlobResourceContents(
        uri=asked, mime_type=mime, blob=base64.b64encode(data).decode()
    )
    return types.ReadResourceResult(contents=[blob])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    caption = types.TextContent(type="text", text=f"Here is {params.name}.")
    if params.name == "foreign":
        target = os.environ.get("LINKS_UPSTREAM_FOREIGN", "other://report.pdf")
        link = types.ResourceLink(type="resource_link", uri=target, name="report.pdf")
    else:
        file, mime = LINKED[params.name]
        link = types.ResourceLink(type="resource_link", uri=uri(file), name=file, mime_type=mime)
    return types.CallToolResult(content=[caption, link])


server: Server[Any] = Server(
    "links",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
