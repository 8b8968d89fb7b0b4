"""hermes-agent as a test client: its own environment (`make hermes` builds `.venvs/hermes`,
hermes pins an older MCP SDK than ours), a home of its own per test (`HERMES_HOME`) whose
config.yaml names the MCP servers and the model, and one non-interactive turn.

hermes starts a stdio MCP server with a bare environment (PATH, HOME, LANG, XDG_* and a few
more): every setting a door needs is in the server's `env:`, as a user must write it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.scripted_model import MODEL_NAME

ROOT = Path(__file__).resolve().parents[2]
HERMES = ROOT / ".venvs" / "hermes" / "bin" / "hermes"
MCP_MEDIA = Path(sys.executable).parent / "mcp-media"
TOOLS_ONLY = [sys.executable, "-m", "tests.support.tools_upstream"]
# `hermes chat` waits for MCP discovery up to this bound, and the wait ends the moment
# discovery does, so a generous bound costs nothing on a quick start.
DISCOVERY_TIMEOUT_S = 120
# `hermes -z` does not wait at all: it builds its agent, and with it the list of tools its
# model is offered, while a server is still starting. This user plugin (plugins are loaded
# before discovery starts) runs discovery at load, so every server is connected, or has
# failed, before the agent is built.
MCP_READY_PLUGIN = "mcp-ready"
_PLUGIN_MANIFEST = f"name: {MCP_READY_PLUGIN}\nversion: 1.0.0\ndescription: MCP servers first\n"
_PLUGIN_CODE = """def register(ctx):
    from tools.mcp_tool import discover_mcp_tools

    discover_mcp_tools()
"""


def hermes_binary() -> Path:
    """hermes' executable; a missing one fails the test (CI builds it: `make hermes`)."""
    assert HERMES.exists(), f"{HERMES} is missing: run `make hermes` (hermes-agent's own venv)"
    return HERMES


@dataclass(frozen=True, slots=True)
class McpServer:
    """One `mcp_servers:` entry: mcp-media with these arguments and settings."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def entry(self) -> dict[str, object]:
        return {"command": str(MCP_MEDIA), "args": self.args, "env": self.env, "timeout": 120}


def proxy(images: str, env: dict[str, str], *options: str) -> McpServer:
    """`mcp-media proxy --images MODE [OPTIONS]` in front of the tools-only upstream, which
    it starts with the environment hermes gave the proxy."""
    args = ["proxy", "--images", images, *options, "--", *TOOLS_ONLY]
    return McpServer(args, {"PYTHONPATH": str(ROOT), **env})


def tool_result(sent: str) -> dict[str, str]:
    """The JSON hermes makes of an MCP tool result ({"result": text} or {"error": text}),
    out of the untrusted-content frame it puts around it for the model."""
    # json.dumps keeps the result on one line: its line breaks are escaped.
    line = next(line for line in sent.splitlines() if line.startswith("{"))
    parsed: dict[str, str] = json.loads(line)
    return parsed


def config(model_url: str, servers: dict[str, McpServer], plugins: list[str]) -> dict[str, object]:
    """config.yaml: the scripted model as a custom OpenAI-compatible endpoint, the servers."""
    return {
        "model": {
            "provider": "custom",
            "base_url": model_url,
            "default": MODEL_NAME,
            "api_key": "not-needed",
            "context_length": 131072,
        },
        "mcp_discovery_timeout": DISCOVERY_TIMEOUT_S,
        "plugins": {"enabled": plugins},
        "mcp_servers": {name: server.entry() for name, server in servers.items()},
    }


@dataclass(frozen=True, slots=True)
class Turn:
    returncode: int
    stdout: str
    stderr: str
    home: Path

    def log(self) -> str:
        """What hermes wrote, for assertion messages: its output and its log files."""
        logs = sorted((self.home / "logs").glob("*.log"))
        tails = [f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in logs]
        head = [f"rc={self.returncode}", self.stdout[-2000:], self.stderr[-4000:]]
        return "\n".join([*head, *tails])


def run_turn(
    home: Path, model_url: str, servers: dict[str, McpServer], prompt: str, *, oneshot: bool
) -> Turn:
    """One turn of hermes in `home`: `hermes -z PROMPT` (oneshot, with the plugin that makes
    it wait for MCP discovery) or `hermes chat -Q -q PROMPT` (which waits by itself)."""
    home.mkdir(parents=True, exist_ok=True)
    if oneshot:
        plugin = home / "plugins" / MCP_READY_PLUGIN
        plugin.mkdir(parents=True)
        (plugin / "plugin.yaml").write_text(_PLUGIN_MANIFEST)
        (plugin / "__init__.py").write_text(_PLUGIN_CODE)
    plugins = [MCP_READY_PLUGIN] if oneshot else []
    (home / "config.yaml").write_text(yaml.safe_dump(config(model_url, servers, plugins)))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "HERMES_HOME": str(home),
    }
    if oneshot:
        command = [str(hermes_binary()), "-z", prompt]
    else:
        command = [str(hermes_binary()), "chat", "-Q", "-q", prompt]
    proc = subprocess.run(
        command,
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Turn(proc.returncode, proc.stdout, proc.stderr, home)


# hermes' own speech providers, called as its gateway calls them for a voice message (STT)
# and as its text_to_speech tool does (TTS); each prints its JSON answer.
_SPEECH_CALL = """
import json, sys
if sys.argv[1] == "stt":
    from tools.transcription_tools import transcribe_audio
    print(json.dumps(transcribe_audio(sys.argv[2])))
else:
    from tools.tts_tool import text_to_speech_tool
    print(text_to_speech_tool(sys.argv[2], output_path=sys.argv[3]))
"""


def speech_config(api_url: str, key: str) -> dict[str, object]:
    """config.yaml: hermes' OpenAI STT and TTS providers pointed at `mcp-media serve`. The
    TTS provider takes its key from VOICE_TOOLS_OPENAI_KEY only; STT from its section."""
    return {
        "stt": {"provider": "openai", "openai": {"api_key": key, "base_url": api_url}},
        "tts": {
            "provider": "openai",
            "openai": {"base_url": api_url, "model": "tts-1", "voice": "alloy"},
        },
    }


def speech_call(home: Path, api_url: str, key: str, *args: str) -> dict[str, object]:
    """`stt AUDIO` or `tts TEXT OUT` through hermes' providers in `home`; their JSON answer."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(speech_config(api_url, key)))
    python = hermes_binary().parent / "python"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HERMES_HOME": str(home),
        "VOICE_TOOLS_OPENAI_KEY": key,
    }
    proc = subprocess.run(
        [str(python), "-c", _SPEECH_CALL, *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer
