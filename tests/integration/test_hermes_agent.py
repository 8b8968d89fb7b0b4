"""hermes-agent (PyPI, pinned, in its own venv: `make hermes`) as the agent in front of
mcp-media, as a user runs it: a real hermes process whose config.yaml starts `mcp-media proxy`
before a tools-only upstream (and `mcp-media mcp`), and whose model is a scripted
OpenAI-protocol server that calls one tool and keeps what the model was sent. Each test
asserts what the model received. A missing hermes fails these tests; it never skips them.

Whether the model is sent one `MEDIA:` line per image or two (hermes names an image block it
saved itself) is left open here: the tests ask for the lines that must be there."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from tests.support.fake_openai import FakeOpenAI, Mode
from tests.support.hermes import (
    MCP_MEDIA,
    McpServer,
    Turn,
    proxy,
    run_turn,
    tool_result,
)
from tests.support.net import free_port
from tests.support.scripted_model import FINAL_TEXT, Call, ScriptedModel
from tests.support.tools_upstream import ERROR_TEXT, TOOLS, png

pytestmark = pytest.mark.integration

SERVER = "shots"
SUMMARY = "A red test card that fades to yellow."
UPSTREAM_TOOLS = [f"mcp__{SERVER}__{tool.name}" for tool in TOOLS]


@pytest.fixture
def vision() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        fake.set(reply=SUMMARY)
        yield fake


@dataclass(frozen=True, slots=True)
class Received:
    """What hermes sent its model: the tools of its first request and the tools' results."""

    offered: list[str]
    sent: dict[str, str]  # the last tool result: {"result": text} or {"error": text}
    turn: Turn
    before: list[dict[str, str]]  # the results of the calls before the last

    @property
    def text(self) -> str:
        return self.sent.get("result") or self.sent["error"]

    def media_paths(self) -> list[Path]:
        return [
            Path(x.removeprefix("MEDIA:")) for x in self.text.splitlines() if x.startswith("MEDIA:")
        ]


def settings(home: Path, vision_url: str) -> dict[str, str]:
    return {
        "MCP_MEDIA_HOME": str(home),
        "MCP_MEDIA_VISION__BASE_URL": vision_url,
        "MCP_MEDIA_VISION__MODEL": "fake-vision",
    }


def call(
    tmp_path: Path,
    tool: str,
    servers: dict[str, McpServer],
    *then: Call,
    oneshot: bool = True,
) -> Received:
    """One hermes turn whose model calls `tool` of the `shots` server, then each of `then`:
    `Received.sent` is the last call's result, `Received.before` the others'."""
    with ScriptedModel(f"mcp__{SERVER}__{tool}", "{}", *then) as model:
        prompt = f"Call the {tool} tool."
        turn = run_turn(tmp_path / "hermes", model.base_url, servers, prompt, oneshot=oneshot)
        offered = model.tool_names()
        results = model.tool_results()
    assert turn.returncode == 0, turn.log()
    assert FINAL_TEXT in turn.stdout, turn.log()
    assert offered, turn.log()
    assert len(results) == 1 + len(then), (offered[0], turn.log())
    *before, last = [tool_result(sent) for sent in results]
    return Received(offered[0], last, turn, before)


def through_proxy(
    tmp_path: Path, tool: str, images: str, vision_url: str, *options: str
) -> Received:
    env = settings(tmp_path / "media", vision_url)
    return call(tmp_path, tool, {SERVER: proxy(images, env, *options)})


def ours(received: Received, home: Path) -> Path:
    """The one path under our home the model was given."""
    (path,) = [p for p in received.media_paths() if p.is_relative_to(home)]
    return path


def hermes_saved_images(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "hermes" / "cache" / "images").glob("*"))


def test_text_mode_gives_the_model_the_summary_and_the_saved_path(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    received = through_proxy(tmp_path, "screenshot", "text", vision.base_url)
    lines = received.text.splitlines()
    assert lines[0] == "Here is the screen.", received.text
    assert SUMMARY in lines, received.text
    saved = ours(received, tmp_path / "media")
    assert saved.suffix == ".png" and saved.read_bytes() == png()
    # No pixels went to hermes: it saved no image of its own.
    assert hermes_saved_images(tmp_path) == []
    assert vision.request_count == 1


@pytest.mark.parametrize("mode", ["keep", "fit"])
def test_keep_and_fit_give_hermes_the_image_and_the_model_the_summary(
    tmp_path: Path, vision: FakeOpenAI, mode: str
) -> None:
    received = through_proxy(tmp_path, "screenshot", mode, vision.base_url)
    assert received.text.splitlines()[0] == "Here is the screen.", received.text
    assert SUMMARY in received.text.splitlines(), received.text
    # The picture reached hermes (it saved the image block itself), and every path the
    # model was given is the picture.
    (kept,) = hermes_saved_images(tmp_path)
    assert kept.read_bytes() == png()
    assert received.media_paths(), received.text
    assert all(p.read_bytes() == png() for p in received.media_paths()), received.text


def test_fit_sends_hermes_a_smaller_copy_of_an_image_past_the_limit(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    received = through_proxy(
        tmp_path, "screenshot", "fit", vision.base_url, "--max-image-side", "16"
    )
    assert SUMMARY in received.text.splitlines(), received.text
    (sent,) = hermes_saved_images(tmp_path)
    with Image.open(io.BytesIO(sent.read_bytes())) as image:
        assert max(image.size) == 16
    # The original is what was summarised and kept.
    assert any(p.read_bytes() == png() for p in (tmp_path / "media" / "cache").rglob("*.png"))
    assert vision.received[0].image_width == 24


def test_link_gives_the_model_our_resource_and_the_summary(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    received = through_proxy(tmp_path, "screenshot", "link", vision.base_url)
    saved = ours(received, tmp_path / "media")
    assert f"mcp-media://media/{saved.stem}" in received.text
    assert f"mcp__{SERVER}__read_resource" in received.offered
    assert SUMMARY in received.text.splitlines(), received.text
    assert hermes_saved_images(tmp_path) == []


def test_a_linked_image_read_back_by_hermes_is_saved_with_its_extension(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    """hermes saves a blob it reads with `read_resource` under the last segment of the
    contents' URI: ours carries the file's extension, so the model is given a `.png` it can
    open by name, and that URI reads back the same bytes."""
    uri = f"mcp-media://media/{hashlib.sha256(png()).hexdigest()}"
    env = settings(tmp_path / "media", vision.base_url)
    reads = [
        Call(f"mcp__{SERVER}__read_resource", json.dumps({"uri": asked}))
        for asked in (uri, f"{uri}.png")
    ]
    received = call(tmp_path, "screenshot", {SERVER: proxy("link", env)}, *reads)
    for sent in [received.before[-1], received.sent]:
        saved = re.findall(r"MCP resource saved to (\S+) \(image/png, ", sent["result"])
        assert len(saved) == 1, sent
        assert saved[0].endswith(".png") and Path(saved[0]).read_bytes() == png(), sent


def test_an_error_result_keeps_the_upstream_text_on_its_own_line(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    received = through_proxy(tmp_path, "expired", "text", vision.base_url)
    assert "error" in received.sent, received.sent
    lines = received.text.splitlines()
    # hermes joins an error's text blocks with nothing between them: our block brings its
    # own line break, so the upstream's text stays whole and our tag starts a line.
    assert lines[0] == ERROR_TEXT, received.text
    assert ours(received, tmp_path / "media").read_bytes() == png()
    assert SUMMARY in lines, received.text


def test_the_vision_endpoint_down_still_gives_the_model_the_result_and_a_named_marker(
    tmp_path: Path,
) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    received = through_proxy(tmp_path, "screenshot", "text", down)
    lines = received.text.splitlines()
    assert lines[0] == "Here is the screen.", received.text
    assert ours(received, tmp_path / "media").read_bytes() == png()
    (marker,) = [x for x in lines if "summary unavailable" in x]
    assert "connection_refused" in marker, marker


def test_a_failing_vision_endpoint_gives_a_marker_naming_the_failure(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    vision.set(mode=Mode.ERROR, status=500)
    received = through_proxy(tmp_path, "screenshot", "text", vision.base_url)
    assert received.text.splitlines()[0] == "Here is the screen.", received.text
    (marker,) = [x for x in received.text.splitlines() if "summary unavailable" in x]
    assert "500" in marker or "server_error" in marker, marker
    assert SUMMARY not in received.text


def test_hermes_chat_waits_for_discovery_and_sees_both_doors(
    tmp_path: Path, vision: FakeOpenAI
) -> None:
    """`hermes chat -q` waits for MCP discovery up to `mcp_discovery_timeout`: the model is
    offered the upstream's tools through the proxy and our own tools beside them."""
    env = settings(tmp_path / "media", vision.base_url)
    servers = {SERVER: proxy("text", env), "media": McpServer(["mcp"], env)}
    received = call(tmp_path, "ping", servers, oneshot=False)
    assert received.sent == {"result": "pong"}
    assert set(UPSTREAM_TOOLS) <= set(received.offered), received.offered
    assert "mcp__media__describe_image" in received.offered, received.offered


def test_hermes_oneshot_sees_the_proxys_tools(tmp_path: Path, vision: FakeOpenAI) -> None:
    """`hermes -z` with the user plugin that runs MCP discovery as plugins load (tests/support/
    hermes.py): the model is offered every upstream tool through the proxy. Without it, -z
    fixes its model's tools before the proxy has answered `tools/list`."""
    received = through_proxy(tmp_path, "ping", "text", vision.base_url)
    assert received.sent == {"result": "pong"}
    assert set(UPSTREAM_TOOLS) <= set(received.offered), received.offered


@pytest.mark.models
def test_audio_reaches_the_model_as_its_transcript(tmp_path: Path, models_home: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    (media / "models").symlink_to(models_home / "models")
    spoken = tmp_path / "spoken.wav"
    speak = [str(MCP_MEDIA), "speak", "--inline", "--format", "wav", "--out", str(spoken)]
    env = {"PATH": str(Path(sys.executable).parent), "MCP_MEDIA_HOME": str(media)}
    made = subprocess.run(
        [*speak, "The invoice was paid on Monday."],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    env = {"MCP_MEDIA_HOME": str(media), "TOOLS_UPSTREAM_VOICE": str(spoken)}
    received = call(tmp_path, "voice", {SERVER: proxy("text", env)})
    assert "paid on monday" in received.text.lower(), received.text
    saved = ours(received, media)
    assert saved.suffix == ".wav" and saved.read_bytes() == spoken.read_bytes()
