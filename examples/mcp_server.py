"""A small MCP server whose tools answer with media, for trying the proxy and for `make run`.

    python examples/mcp_server.py          # stdio

Tools: `screenshot` (a PNG with legible text), `voice_note` (a one-second WAV tone: no
speech, so its transcript says so), `report` (an embedded PDF), `stats` (typed output:
structured content plus its text copy), `notes` (an embedded Markdown resource), `ping`.
"""

from __future__ import annotations

import base64
import io
import math
import struct
import wave

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from PIL import Image, ImageDraw, ImageFont
from pydantic import BaseModel

server = MCPServer("demo-drive", instructions="A drive whose files come back as media.")


def _png(text: str, size: tuple[int, int] = (900, 260)) -> bytes:
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    try:
        font: ImageFont.ImageFont | ImageFont.FreeTypeFont = ImageFont.load_default(size=48)
    except TypeError:  # an old Pillow without sized default fonts
        font = ImageFont.load_default()
    draw.text((40, 90), text, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _tone(seconds: float = 1.0, rate: int = 16000) -> bytes:
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


def _one_page_pdf(line: str) -> bytes:
    """A valid one-page PDF showing `line` in Helvetica (its xref table counted here)."""
    page = f"BT /F1 24 Tf 72 700 Td ({line}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page), page),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


REPORT_PDF = _one_page_pdf("Quarterly report Q3: revenue up 12%")


class Stats(BaseModel):
    files: int
    bytes_used: int


@server.tool()
def screenshot(text: str = "Invoice 2041: total due $1,250") -> types.CallToolResult:
    """A screenshot of the shared drive's preview pane."""
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Here is the preview."),
            types.ImageContent(type="image", data=_b64(_png(text)), mime_type="image/png"),
        ]
    )


@server.tool()
def voice_note() -> types.CallToolResult:
    """The latest voice note left on the drive."""
    return types.CallToolResult(
        content=[types.AudioContent(type="audio", data=_b64(_tone()), mime_type="audio/wav")]
    )


@server.tool()
def report() -> types.CallToolResult:
    """The quarterly report, embedded as a PDF."""
    return types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="drive://reports/q3.pdf", mime_type="application/pdf", blob=_b64(REPORT_PDF)
                ),
            )
        ]
    )


@server.tool()
def stats() -> Stats:
    """How full the drive is (typed output)."""
    return Stats(files=42, bytes_used=1_250_000)


@server.tool()
def notes() -> types.CallToolResult:
    """The team's notes, embedded as Markdown."""
    return types.CallToolResult(
        content=[
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="drive://notes/todo.md", mime_type="text/markdown", text="- send the report"
                ),
            )
        ]
    )


@server.tool()
def ping() -> str:
    """Answers `pong` (text only: what the proxy's overhead is measured on)."""
    return "pong"


@server.resource("drive://readme")
def readme() -> str:
    """What this drive holds."""
    return "Reports, screenshots and voice notes."


@server.prompt()
def summarise_drive() -> str:
    """Ask for a summary of the drive."""
    return "Summarise what is on the demo drive."


if __name__ == "__main__":
    server.run()
