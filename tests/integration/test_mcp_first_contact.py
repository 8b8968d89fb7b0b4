"""An agent's first contact with the MCP door: a real MCP client (the official SDK) starts a
real `mcp-media proxy` / `mcp-media mcp` process in front of a tools-only upstream, as an
agent does, with settings a new user gets wrong."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.conftest import ROOT
from tests.support.net import free_port
from tests.support.tools_upstream import ERROR_TEXT, TOOLS

pytestmark = pytest.mark.integration

TOOLS_ONLY = ["--", sys.executable, "-m", "tests.support.tools_upstream"]
UPSTREAM_TOOLS = {tool.name for tool in TOOLS}


def door_env(home: Path, **settings: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    base.pop("AUXILIARY_VISION_MODEL", None)
    return {**base, "PYTHONPATH": str(ROOT), "MCP_MEDIA_HOME": str(home), **settings}


@asynccontextmanager
async def door(home: Path, stderr: Path, *args: str, **settings: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", *args],
        env=door_env(home, **settings),
        cwd=str(ROOT),
    )
    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            yield client


def texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


def run(test: Any) -> Any:
    return anyio.run(test)


# Each: a setting a new user gets wrong, and what the one WARNING line names.
WRONG = {
    "vision endpoint without a model": (
        {"MCP_MEDIA_VISION__BASE_URL": "http://127.0.0.1:9/v1"},
        "MCP_MEDIA_VISION__BASE_URL: vision provider `openai` needs a model",
    ),
    "a number that is no number": (
        {"MCP_MEDIA_VISION__TIMEOUT": "soon"},
        "MCP_MEDIA_VISION__TIMEOUT is not used",
    ),
    "a store that is no bucket": (
        {"MCP_MEDIA_STORE__URL": "ftp://somewhere"},
        "MCP_MEDIA_STORE__URL is not used",
    ),
    "a broker that does not answer": (
        {"MCP_MEDIA_REDIS_URL": "redis://127.0.0.1:{port}/0"},
        "the broker (MCP_MEDIA_REDIS_URL) does not answer",
    ),
    "a broker certificate that is not there": (
        {
            "MCP_MEDIA_REDIS_URL": "rediss://127.0.0.1:{port}/0",
            "MCP_MEDIA_REDIS_CA_CERTS": "/nonexistent/ca.pem",
        },
        "MCP_MEDIA_REDIS_CA_CERTS=/nonexistent/ca.pem: no such file; jobs run in this process",
    ),
    "no models": (
        {"MCP_MEDIA_STT__MODEL": "not-prepared", "MCP_MEDIA_TTS__MODEL": "not-prepared"},
        "",
    ),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrong_setting_never_stops_the_proxy(tmp_path: Path, case: str) -> None:
    given, warned = WRONG[case]
    port = str(free_port())
    settings = {name: value.replace("{port}", port) for name, value in given.items()}
    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        async with door(tmp_path / "home", stderr, "proxy", *TOOLS_ONLY, **settings) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed >= UPSTREAM_TOOLS
            assert texts(await client.call_tool("ping", {})) == ["pong"]
            shot = await client.call_tool("screenshot", {}, read_timeout_seconds=30)
            assert not shot.is_error
            # The original result survives: its text first, as it came, and its image.
            assert texts(shot)[0] == "Here is the screen."
            assert [b.type for b in shot.content][:2] == ["text", "image"]
            failed = await client.call_tool("expired", {}, read_timeout_seconds=30)
            assert failed.is_error
            assert texts(failed)[0] == ERROR_TEXT

    run(scenario)
    logged = stderr.read_text()
    assert "Traceback" not in logged
    if warned:
        warnings = [line for line in logged.splitlines() if line.startswith("WARNING")]
        assert any(warned in line for line in warnings), logged


def test_the_own_tools_door_starts_with_a_vision_endpoint_without_a_model(
    tmp_path: Path,
) -> None:
    stderr = tmp_path / "mcp.stderr"

    async def scenario() -> None:
        bad = {"MCP_MEDIA_VISION__BASE_URL": "http://127.0.0.1:9/v1"}
        async with door(tmp_path / "home", stderr, "mcp", **bad) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert {"describe_image", "media_result", "media_status"} <= listed

    run(scenario)
    assert "MCP_MEDIA_VISION__BASE_URL: vision provider `openai` needs a model" in (
        stderr.read_text()
    )


def test_a_tools_only_upstream_gets_our_resources_and_empty_prompts(tmp_path: Path) -> None:
    """No -32601 for a capability the proxy advertises: our cached media are listed and read
    back, the upstream's missing resources and prompts are empty lists."""
    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        args = ["proxy", "--images", "link", *TOOLS_ONLY]
        async with door(tmp_path / "home", stderr, *args) as client:
            caps = client.server_capabilities
            assert caps.resources is not None and caps.prompts is not None
            assert (await client.list_prompts()).prompts == []
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["mcp-media://media/{sha256}"]
            assert (await client.list_resources()).resources == []
            shot = await client.call_tool("screenshot", {}, read_timeout_seconds=30)
            (link,) = [b for b in shot.content if isinstance(b, types.ResourceLink)]
            listed = (await client.list_resources()).resources
            assert [str(r.uri) for r in listed] == [str(link.uri)]
            (read,) = (await client.read_resource(str(link.uri))).contents
            assert isinstance(read, types.BlobResourceContents)
            assert read.mime_type == "image/png"

    run(scenario)


def test_server_everything_resources_and_prompts_pass_through(tmp_path: Path) -> None:
    from tests.integration.test_mcp_protocol import UPSTREAM_EVERYTHING

    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        args = ["proxy", "--", *UPSTREAM_EVERYTHING]
        async with door(tmp_path / "home", stderr, *args) as client:
            prompts = (await client.list_prompts()).prompts
            assert prompts
            resources = (await client.list_resources()).resources
            assert any(not str(r.uri).startswith("mcp-media://") for r in resources)
            templates = (await client.list_resource_templates()).resource_templates
            assert len(templates) > 1  # the upstream's and ours

    run(scenario)


def test_a_cached_image_handed_out_again_is_fresh(tmp_path: Path) -> None:
    """A client that passes on only recent files (younger than 600 s) accepts a file cached
    long ago once it is handed out again."""
    stderr = tmp_path / "proxy.stderr"

    def handed_out(result: types.CallToolResult) -> Path:
        (line,) = [x for t in texts(result) for x in t.splitlines() if x.startswith("MEDIA:")]
        return Path(line.removeprefix("MEDIA:"))

    async def scenario() -> None:
        async with door(
            tmp_path / "home", stderr, "proxy", "--images", "text", *TOOLS_ONLY
        ) as client:
            path = handed_out(await client.call_tool("screenshot", {}, read_timeout_seconds=30))
            long_ago = time.time() - 3600
            os.utime(path, (long_ago, long_ago))
            again = handed_out(await client.call_tool("screenshot", {}, read_timeout_seconds=30))
            assert again == path
            assert time.time() - path.stat().st_mtime < 600
            # Read back by its URI (no link handed out for it): its MIME type, from its name,
            # lets a client save it with an extension.
            uri = f"mcp-media://media/{path.stem}"
            (read,) = (await client.read_resource(uri)).contents
            assert isinstance(read, types.BlobResourceContents) and read.mime_type == "image/png"

    run(scenario)


def test_what_the_model_reads(tmp_path: Path) -> None:
    """Our text blocks carry their own line breaks (a client joining blocks with nothing
    between them keeps our tag off the upstream's words), and media_result says its summary
    once (in its text, not again in structuredContent)."""
    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        async with door(tmp_path / "home", stderr, "proxy", *TOOLS_ONLY) as client:
            failed = await client.call_tool("expired", {}, read_timeout_seconds=30)
            joined = "".join(texts(failed))
            assert joined.startswith(ERROR_TEXT + "\nMEDIA:")
            (ours,) = texts(failed)[1:]
            assert ours.startswith("\n") and ours.endswith("\n")
            path = Path(ours.split("MEDIA:")[1].split("\n")[0])
            got = await client.call_tool("media_result", {"id": path.stem})
            (said,) = texts(got)
            assert "PNG image, 24x16" in said
            assert got.structured_content is not None
            assert got.structured_content["status"] == "done"
            assert "PNG image" not in str(got.structured_content)

    run(scenario)


def test_inline_max_zero_inlines_nothing(tmp_path: Path) -> None:
    """--inline-max 0 is a limit of 0 bytes (every embedded blob a link), not "no limit"."""
    stderr = tmp_path / "proxy.stderr"
    upstream = ["--", sys.executable, "-m", "tests.support.mcp_upstream"]

    async def scenario() -> None:
        async with door(
            tmp_path / "home", stderr, "proxy", "--inline-max", "0", *upstream
        ) as client:
            report = await client.call_tool("report", {}, read_timeout_seconds=30)
            assert [b.type for b in report.content] == ["resource_link", "text"]

    run(scenario)


def test_without_models_the_speech_tools_are_not_offered(tmp_path: Path) -> None:
    """No broker and no prepared models: speak and transcribe_audio cannot be served, so
    they are not listed, and stderr says which model is missing and how to get it."""
    stderr = tmp_path / "mcp.stderr"

    async def scenario() -> None:
        async with door(tmp_path / "home", stderr, "mcp") as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed == {"describe_image", "media_result", "media_status", "read_document"}

    run(scenario)
    logged = stderr.read_text()
    assert "no speech-to-text model at " in logged and "transcribe_audio is not offered" in logged
    assert "no text-to-speech model at " in logged and "`make models`" in logged
