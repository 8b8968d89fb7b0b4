"""Resource links resolved through a real `mcp-media proxy` in front of a real upstream that
answers with links to resources it serves: under `--images text` a link to its PDF is read
on the same session, saved and digested (the agent's text holds the document's sentence)
while the client keeps the link; text read for a link comes embedded. A link whose read
fails, takes too long, is over the cap or names another server's resource stays as it came,
with a line saying why; under `keep` links are left alone unless the setting says on."""

from __future__ import annotations

import json
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from tests.integration.test_mcp_first_contact import door, run, texts
from tests.support.links_upstream import NOTES_TEXT, REPORT_SENTENCE

pytestmark = pytest.mark.integration

UPSTREAM = [sys.executable, "-m", "tests.support.links_upstream"]


def proxy(
    home: Path, stderr: Path, *args: str, **settings: str
) -> AbstractAsyncContextManager[Client]:
    return door(home, stderr, "proxy", "--wait", "120", *args, **settings)


async def call(client: Client, tool: str) -> types.CallToolResult:
    """A call that may wait for its digest on a busy machine."""
    return await client.call_tool(tool, {}, read_timeout_seconds=180)


def links(result: types.CallToolResult) -> list[str]:
    return [str(b.uri) for b in result.content if isinstance(b, types.ResourceLink)]


def test_a_linked_pdf_is_read_saved_and_digested_and_the_link_kept(tmp_path: Path) -> None:
    async def scenario() -> None:
        args = ("--images", "text", "--", *UPSTREAM)
        async with proxy(tmp_path / "home", tmp_path / "proxy.stderr", *args) as client:
            report = await call(client, "report")
            assert [b.type for b in report.content] == ["text", "resource_link", "text"]
            assert links(report) == ["docs://report.pdf"]
            said = texts(report)[1]
            assert said.strip().startswith("[MCP resource saved to ")
            assert "(application/pdf, " in said and "[Document digest" in said
            assert REPORT_SENTENCE in said
            saved = Path(said.split(" saved to ")[1].split(" (")[0])
            assert saved.read_bytes().startswith(b"%PDF")

            notes = await call(client, "notes")
            assert [b.type for b in notes.content] == ["text", "resource"], notes.content
            embedded = notes.content[1]
            assert isinstance(embedded, types.EmbeddedResource)
            assert isinstance(embedded.resource, types.TextResourceContents)
            assert embedded.resource.text == NOTES_TEXT

    run(scenario)


def test_links_that_cannot_be_read_stay_links_with_the_reason(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "docs": {"command": UPSTREAM[0], "args": UPSTREAM[1:]},
        "other": {
            "command": UPSTREAM[0],
            "args": UPSTREAM[1:],
            "env": {"LINKS_UPSTREAM_SCHEME": "other"},
        },
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    settings = {
        "MCP_MEDIA_MAX_BLOB_BYTES": "200000",
        "MCP_MEDIA_MCP__LINK_READ_TIMEOUT": "2",
    }

    async def scenario() -> None:
        args = ("--images", "text", "--config", str(config))
        async with proxy(tmp_path / "home", tmp_path / "proxy.stderr", *args, **settings) as c:
            await c.list_resources()  # who serves other://report.pdf is known from here on
            expected = {
                "docs__missing": ("docs://gone.pdf", "resources/read failed: resource not found"),
                "docs__slow": ("docs://slow.pdf", "gave no answer within the result's 2 s"),
                "docs__big": ("docs://big.bin", "over the 200000-byte cap"),
                "docs__foreign": ("other://report.pdf", "it names another server's resource"),
            }
            for tool, (uri, reason) in expected.items():
                result = await call(c, tool)
                assert [b.type for b in result.content] == ["text", "resource_link", "text"]
                assert links(result) == [uri]
                line = texts(result)[1].strip()
                assert line.startswith(f"[MCP resource link {uri} not read: "), line
                assert reason in line, line
            # The upstream's session still serves: its own link is read after all that.
            report = await call(c, "docs__report")
            assert REPORT_SENTENCE in texts(report)[1]

    run(scenario)


def test_under_keep_links_are_left_alone_unless_the_setting_says_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        args = ("--", *UPSTREAM)
        home, stderr = tmp_path / "home", tmp_path / "proxy.stderr"
        async with proxy(home, stderr, *args) as keep:
            report = await call(keep, "report")
            assert [b.type for b in report.content] == ["text", "resource_link"]
        async with proxy(home, stderr, *args, MCP_MEDIA_MCP__RESOLVE_LINKS="on") as on:
            report = await call(on, "report")
            assert [b.type for b in report.content] == ["text", "resource_link", "text"]
            assert REPORT_SENTENCE in texts(report)[1]
        async with proxy(home, stderr, "--images", "text", "--resolve-links", "off", *args) as off:
            report = await call(off, "report")
            assert [b.type for b in report.content] == ["text", "resource_link"]

    run(scenario)


def test_a_linked_image_keeps_its_media_line_when_sent_media_are_not_tagged(
    tmp_path: Path,
) -> None:
    """`--sent-media-tag omit` is for clients that write their own line for the media they
    receive; a linked image goes back as its link, so no client has a file of it: ours."""

    async def scenario() -> None:
        args = ("--sent-media-tag", "omit", "--resolve-links", "on", "--", *UPSTREAM)
        async with proxy(tmp_path / "home", tmp_path / "proxy.stderr", *args) as client:
            picture = await call(client, "picture")
            assert [b.type for b in picture.content] == ["text", "resource_link", "text"]
            assert links(picture) == ["docs://picture.png"]
            tag = texts(picture)[1].strip().splitlines()[0]
            assert tag.startswith("MEDIA:") and tag.endswith(".png"), texts(picture)
            assert Path(tag.removeprefix("MEDIA:")).is_file()

    run(scenario)
