"""What the model reads of a medium, through a real `mcp-media proxy` process in front of a
tools-only upstream: one `MEDIA:` line per image for a client that writes its own (one named
hermes by default; hermes-agent 0.19, which sends the MCP Python SDK's default clientInfo,
by the setting), ours for any other; and an audio block with no speech model prepared says
what is missing and how to get it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.conftest import ROOT
from tests.integration.test_mcp_first_contact import TOOLS_ONLY, door_env, run, texts

pytestmark = pytest.mark.integration

HERMES = types.Implementation(name="hermes-agent", version="0.20.0")  # one that names itself
SDK_DEFAULT = types.Implementation(name="mcp", version="0.1.0")  # hermes-agent 0.19 and others
OTHER = types.Implementation(name="claude-code", version="2.1.0")


@asynccontextmanager
async def proxy_for(
    client_info: types.Implementation, home: Path, stderr: Path, *args: str, **settings: str
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", *args, *TOOLS_ONLY],
        env=door_env(home, **settings),
        cwd=str(ROOT),
    )
    with stderr.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), read_timeout_seconds=60, client_info=client_info
        ) as client:
            yield client


def media_lines(result: types.CallToolResult) -> list[str]:
    return [line for t in texts(result) for line in t.splitlines() if line.startswith("MEDIA:")]


@pytest.mark.parametrize("images", ["keep", "fit"])
def test_hermes_gets_no_second_media_line_and_other_clients_get_ours(
    tmp_path: Path, images: str
) -> None:
    stderr = tmp_path / "proxy.stderr"
    home = tmp_path / "home"

    async def scenario() -> None:
        async with proxy_for(HERMES, home, stderr, "--images", images) as hermes:
            shot = await hermes.call_tool("screenshot", {}, read_timeout_seconds=30)
            assert [b.type for b in shot.content][:2] == ["text", "image"]
            assert media_lines(shot) == []
            assert any("PNG image, 24x16" in t for t in texts(shot))  # its summary stays
        async with proxy_for(OTHER, home, stderr, "--images", images) as other:
            shot = await other.call_tool("screenshot", {}, read_timeout_seconds=30)
            assert len(media_lines(shot)) == 1
        # The setting, for every client: always (hermes too) and omit (hermes 0.19 too).
        async with proxy_for(
            HERMES, home, stderr, "--images", images, MCP_MEDIA_MCP__SENT_MEDIA_TAG="always"
        ) as hermes:
            assert len(media_lines(await hermes.call_tool("screenshot", {}))) == 1
        async with proxy_for(SDK_DEFAULT, home, stderr, "--images", images) as unnamed:
            assert len(media_lines(await unnamed.call_tool("screenshot", {}))) == 1
        async with proxy_for(
            SDK_DEFAULT, home, stderr, "--images", images, MCP_MEDIA_MCP__SENT_MEDIA_TAG="omit"
        ) as hermes_0_19:
            assert media_lines(await hermes_0_19.call_tool("screenshot", {})) == []
        async with proxy_for(
            OTHER, home, stderr, "--images", images, "--sent-media-tag", "omit"
        ) as other:
            assert media_lines(await other.call_tool("screenshot", {})) == []

    run(scenario)


def test_hermes_still_gets_our_line_where_the_image_is_not_sent(tmp_path: Path) -> None:
    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        async with proxy_for(HERMES, tmp_path / "home", stderr, "--images", "text") as hermes:
            shot = await hermes.call_tool("screenshot", {}, read_timeout_seconds=30)
            assert [b.type for b in shot.content] == ["text", "text"]
            assert len(media_lines(shot)) == 1

    run(scenario)


def test_audio_without_a_speech_model_says_what_is_missing(tmp_path: Path) -> None:
    stderr = tmp_path / "proxy.stderr"
    home = tmp_path / "home"

    async def scenario() -> None:
        async with proxy_for(OTHER, home, stderr) as client:
            voice = await client.call_tool("voice", {}, read_timeout_seconds=30)
            said = "\n".join(texts(voice))
            assert "no speech-to-text model prepared" in said, said
            assert "`mcp-media models prepare`" in said
            assert str(home) not in said.replace(media_lines(voice)[0], "")

    run(scenario)
    assert str(home / "models") in stderr.read_text()  # where it looked: in the log
