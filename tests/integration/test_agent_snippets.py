"""The client set-ups of docs/guides/agents.md work as written: every block marked
`<!-- tested: CLIENT -->` is read from the markdown, parsed (JSON, YAML, or `claude mcp add`
lines), and each server in it is started as its client starts it (a bare environment plus
the snippet's `env`) by the official SDK client, which must get `initialize` and
`tools/list` answered.

Only placeholders change: the `mcp-media` path becomes this environment's, the home a
temporary folder, and the upstream `npx -y @modelcontextprotocol/server-everything` a
tools-only server run by this Python (no network here)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.conftest import ROOT
from tests.support.tools_upstream import TOOLS

pytestmark = pytest.mark.integration

GUIDE = ROOT / "docs/guides/agents.md"
MCP_MEDIA = "/home/me/.venvs/mcp-media/bin/mcp-media"
HOME = "/home/me/.cache/mcp-media"
UPSTREAM = ["npx", "-y", "@modelcontextprotocol/server-everything"]
# By its file, so it runs without PYTHONPATH, as a user's upstream does.
TOOLS_ONLY = [sys.executable, str(ROOT / "tests/support/tools_upstream.py")]
# What hermes-agent passes a stdio server besides its `env:` (tools/mcp_tool.py).
BARE = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TERM", "SHELL")
CLIENTS = ("claude-desktop", "claude-code", "claude-mcp-add", "cursor", "vscode", "hermes")
OWN_TOOLS = {"describe_image", "media_result", "media_status"}
BLOCK = re.compile(r"<!-- tested: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.S)


@dataclass(frozen=True, slots=True)
class Server:
    client: str
    name: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]


def snippets() -> dict[str, tuple[str, str]]:
    found = {m[1]: (m[2], m[3]) for m in BLOCK.finditer(GUIDE.read_text())}
    assert sorted(found) == sorted(CLIENTS), f"marked blocks in {GUIDE}: {sorted(found)}"
    return found


def servers_of(client: str, lang: str, text: str) -> list[Server]:
    if lang == "sh":
        return [_added(client, line) for line in text.splitlines() if line.strip()]
    if lang == "yaml":
        entries = yaml.safe_load(text)["mcp_servers"]
    else:
        assert lang == "json", lang
        entries = json.loads(text)["servers" if client == "vscode" else "mcpServers"]
    found = []
    for name, entry in entries.items():
        if client in ("vscode", "claude-code"):
            assert entry["type"] == "stdio", (client, name)
        found.append(
            Server(client, name, entry["command"], tuple(entry["args"]), dict(entry["env"]))
        )
    return found


def _added(client: str, line: str) -> Server:
    """`claude mcp add [--transport stdio] [--env K=V]... NAME -- COMMAND ARGS...`."""
    words = shlex.split(line)
    assert words[:3] == ["claude", "mcp", "add"], line
    cut = words.index("--")
    options, (name,), command = words[3 : cut - 1], words[cut - 1 : cut], words[cut + 1 :]
    env = {}
    pairs = iter(options)
    for option in pairs:
        value = next(pairs)
        if option in ("--env", "-e"):
            key, _, val = value.partition("=")
            env[key] = val
        else:
            assert (option, value) == ("--transport", "stdio"), line
    return Server(client, name, command[0], tuple(command[1:]), env)


def as_started(server: Server, home: Path) -> StdioServerParameters:
    """The server with its placeholders made real, and the environment its client gives."""
    mcp_media = Path(sys.executable).parent / "mcp-media"
    assert mcp_media.is_file(), f"{mcp_media}: `make install` puts it there"
    assert server.command == MCP_MEDIA, server
    args = list(server.args)
    if "--" in args:
        cut = args.index("--")
        assert args[cut + 1 :] == UPSTREAM, server
        args = [*args[: cut + 1], *TOOLS_ONLY]
    env = {k: v.replace(HOME, str(home)) for k, v in server.env.items()}
    bare = {k: os.environ[k] for k in BARE if os.environ.get(k)}
    return StdioServerParameters(command=str(mcp_media), args=args, env={**bare, **env})


async def listed(params: StdioServerParameters, errlog: Any) -> set[str]:
    async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


def test_every_client_has_a_marked_snippet_with_the_proxy_and_the_own_tools() -> None:
    for client, (lang, text) in snippets().items():
        servers = servers_of(client, lang, text)
        kinds = {server.args[0] for server in servers}
        assert kinds == {"proxy", "mcp"}, (client, kinds)
        for server in servers:
            # Clients start servers with a bare environment: the home is named in env.
            assert server.env.get("MCP_MEDIA_HOME") == HOME, (client, server.name)


def test_the_hermes_snippet_holds_every_setting_in_env() -> None:
    lang, text = snippets()["hermes"]
    config = yaml.safe_load(text)
    assert config["mcp_discovery_timeout"] >= 5
    proxy = next(s for s in servers_of("hermes", lang, text) if s.args[0] == "proxy")
    assert {"MCP_MEDIA_HOME", "MCP_MEDIA_VISION__BASE_URL", "MCP_MEDIA_VISION__MODEL"} <= set(
        proxy.env
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_each_snippet_starts_and_lists_its_tools(tmp_path: Path, client: str) -> None:
    lang, text = snippets()[client]
    for server in servers_of(client, lang, text):
        params = as_started(server, tmp_path / "home")
        errors = tmp_path / f"{server.name}.stderr"
        with errors.open("w") as errlog:
            tools = anyio.run(listed, params, errlog)
        logged = errors.read_text()
        assert "Traceback" not in logged, logged
        if server.args[0] == "proxy":
            assert {tool.name for tool in TOOLS} <= tools, (client, tools, logged)
        else:
            assert tools >= OWN_TOOLS, (client, tools, logged)
