"""read_document through the own-tools server (`mcp-media mcp`, jobs in its process): a PDF
a tool returned is read on by pages and by offset from its saved Markdown, the Markdown is
made again when it is gone, and nothing outside the media cache is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.integration.conftest import ROOT
from tests.integration.test_mcp_first_contact import door, door_env, texts
from tests.support.factories import b64
from tests.support.pdf_writer import build_pdf, text_pages

pytestmark = pytest.mark.integration

FIRST = "The orchard keeper counts twelve ladders at dawn."
NINTH = "A brass compass points the barge toward the eastern lock."
INLINE = ("--inline", "--wait", "60", "--json")
NO_BROKER = {"MCP_MEDIA_REDIS_URL": "redis://127.0.0.1:1/0"}  # jobs run in the process


def ingest_pdf(tmp_path: Path, home: Path) -> dict[str, str]:
    pages = text_pages(12, FIRST, at=0)
    pages[8][3] = NINTH
    blob = b64(build_pdf(pages, title="Orchard Log"))
    resource = {"uri": "file:///orchard.pdf", "mimeType": "application/pdf", "blob": blob}
    given = tmp_path / "result.json"
    given.write_text(json.dumps({"content": [{"type": "resource", "resource": resource}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "ingest", str(given), *INLINE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=door_env(home, **NO_BROKER),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (job,) = json.loads(proc.stdout)["jobs"]
    assert job["status"] == "done", job
    output = job["result"]["output"]
    return {"sha256": job["sha256"], "markdown": output["markdown"]}


def test_read_document_reads_on_by_pages_and_offset_and_only_in_the_cache(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    made = ingest_pdf(tmp_path, home)
    markdown = Path(made["markdown"])
    original = markdown.with_name(markdown.name.removesuffix(".md"))
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the agent")

    async def scenario() -> None:
        async with door(home, tmp_path / "mcp.stderr", "mcp", "--inline", **NO_BROKER) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "read_document" in listed
            ninth = await client.call_tool(
                "read_document", {"document": made["sha256"], "pages": "9"}
            )
            assert not ninth.is_error, texts(ninth)
            (shown,) = texts(ninth)
            assert NINTH in shown and FIRST not in shown and "## Page 9" in shown
            assert "untrusted content from the document" in shown
            part = ninth.structured_content
            assert part is not None and part["pages"] == 12 and part["path"] == str(markdown)

            head = await client.call_tool(
                "read_document", {"document": str(original), "offset": 0, "max_chars": 300}
            )
            assert head.structured_content is not None
            assert FIRST in head.structured_content["text"]
            # At most 300 characters, ended at a word's end: reading on starts at a blank.
            after = head.structured_content["next_offset"]
            assert 240 <= after <= 300 and markdown.read_text(encoding="utf-8")[after].isspace()
            assert head.structured_content["text"] == markdown.read_text(encoding="utf-8")[:after]
            assert f"read on with offset={after}" in texts(head)[0]

            for refused, said in [
                (str(outside), "outside the media cache"),
                ("/etc/passwd", "outside the media cache"),
                (str(original.parent / ".." / ".." / ".." / "secret.txt"), "outside"),
                ("0" * 64, "no cached document"),
            ]:
                denied = await client.call_tool("read_document", {"document": refused})
                assert denied.is_error and said in texts(denied)[0], texts(denied)
            far = await client.call_tool(
                "read_document", {"document": made["sha256"], "pages": "40"}
            )
            assert far.is_error and "has 12 pages" in texts(far)[0]

            markdown.unlink()
            again = await client.call_tool(
                "read_document", {"document": made["sha256"], "pages": "1-2", "wait": 60}
            )
            assert not again.is_error, texts(again)
            assert FIRST in texts(again)[0] and markdown.exists()

    anyio.run(scenario)
