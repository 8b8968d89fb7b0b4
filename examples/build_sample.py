"""Rebuild examples/sample_result.json: one MCP CallToolResult with every block type.

Run from the repository root: `.venv/bin/python examples/build_sample.py [AUDIO.ogg]`.
The committed JSON is what `make run` ingests; this script documents where it came from.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent


def sample_png() -> bytes:
    img = Image.new("RGB", (900, 260), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=44)
    draw.rectangle((10, 10, 889, 249), outline=(30, 60, 160), width=6)
    draw.text((40, 50), "Invoice 2041: total due $1,250", fill="black", font=font)
    draw.text((40, 140), "Payment by 15 January 2027", fill=(30, 60, 160), font=font)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    return out.getvalue()


def sample_pdf() -> bytes:
    """A minimal one-page PDF written by hand (valid xref offsets)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        None,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    stream = b"BT /F1 24 Tf 72 700 Td (Quarterly report Q3: revenue up 12%) Tj ET"
    objects[3] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        assert body is not None
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def main() -> None:
    audio_path = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "sample_voice.ogg"
    result = {
        "content": [
            {"type": "text", "text": "Here is what I found in the shared drive."},
            {
                "type": "image",
                "data": base64.b64encode(sample_png()).decode(),
                "mimeType": "image/png",
            },
            {
                "type": "audio",
                "data": base64.b64encode(audio_path.read_bytes()).decode(),
                "mimeType": "audio/ogg",
            },
            {
                "type": "resource",
                "resource": {
                    "uri": "slack://files/F123/quarterly-report.pdf",
                    "mimeType": "application/pdf",
                    "blob": base64.b64encode(sample_pdf()).decode(),
                },
            },
            {
                "type": "resource",
                "resource": {
                    "uri": "notes://meeting/2026-12-01",
                    "mimeType": "text/plain",
                    "text": "Meeting notes: ship the media worker before Friday.",
                },
            },
            {
                "type": "resource_link",
                "uri": "drive://reports/annual-2026.xlsx",
                "name": "annual-2026.xlsx",
                "mimeType": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
                "size": 48213,
            },
        ],
        "isError": False,
    }
    (HERE / "sample_result.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
