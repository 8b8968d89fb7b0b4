"""One `MEDIA:` line per medium: a client that caches the image and audio blocks it receives
(hermes-agent) writes its own line for each, so ours is left out under a block it receives as
such (keep, fit), and comes back wherever the block does not reach it (text, link, a fit
result over its cap)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pipelines import MediaCache, ingest
from pipelines.cache import CacheLimits
from pipelines.fit import FitLimits
from pipelines.rewrite import (
    ENVELOPE_BYTES,
    MediaPolicy,
    RewritePolicy,
    SentMediaTag,
    rewrite_result,
)
from tests.support.factories import audio_block, b64, image_block, png_bytes, result, wav_bytes
from tests.support.screens import screenshot_png
from workers.core.settings import Settings
from workers.doors.mcp.clients import ClientName, client_named, tag_sent
from workers.doors.mcp.rewriter import DoorOptions

pytestmark = pytest.mark.unit

HERMES = ClientName("hermes-agent", "0.20.0")  # a hermes that names itself
SDK_DEFAULT = ClientName("mcp", "0.1.0")  # hermes 0.19, and every unnamed Python SDK client
SUMMARY = {"x": ["[Image summary — a red square]"]}


def _texts(out: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in out["content"] if b["type"] == "text")


def _rewritten(cache: MediaCache, policy: RewritePolicy, notes: bool = True) -> tuple[Any, Any]:
    original = result(
        {"type": "text", "text": "the screen:"},
        image_block(png_bytes()),
        audio_block(wav_bytes(), "audio/wav"),
    )
    rendered = ingest(original, cache=cache)
    said = {m.sha256: [f"[about {m.kind}]"] for m in rendered.media} if notes else {}
    return rewrite_result(original, rendered, said, policy), rendered


@pytest.mark.parametrize("images", [MediaPolicy.KEEP, MediaPolicy.FIT])
def test_a_block_sent_as_such_has_no_media_line_of_ours_but_keeps_its_summary(
    images: MediaPolicy, cache: MediaCache
) -> None:
    out, rendered = _rewritten(cache, RewritePolicy(images=images, tag_sent=False))
    image, audio = rendered.media
    assert [b["type"] for b in out["content"]] == ["text", "image", "text", "audio", "text"]
    assert "MEDIA:" not in _texts(out)
    assert out["content"][2]["text"] == "[about image]"
    assert out["content"][4]["text"] == "[about audio]"
    tagged, _ = _rewritten(cache, RewritePolicy(images=images))  # the default: one line each
    assert _texts(tagged).count("MEDIA:") == 2
    assert f"MEDIA:{image.path}" in _texts(tagged) and f"MEDIA:{audio.path}" in _texts(tagged)


def test_nothing_to_say_under_a_block_sent_as_such_adds_no_text_block(cache: MediaCache) -> None:
    out, _ = _rewritten(cache, RewritePolicy(tag_sent=False), notes=False)
    assert [b["type"] for b in out["content"]] == ["text", "image", "audio"]


@pytest.mark.parametrize("policy", [MediaPolicy.TEXT, MediaPolicy.LINK])
def test_a_block_the_client_does_not_receive_keeps_our_media_line(
    policy: MediaPolicy, cache: MediaCache
) -> None:
    out, rendered = _rewritten(cache, RewritePolicy(images=policy, audio=policy, tag_sent=False))
    for blob in rendered.media:
        assert _texts(out).count(f"MEDIA:{blob.path}") == 1


@pytest.mark.parametrize("notes", [True, False])
def test_a_fit_image_moved_to_a_link_gets_our_media_line_back(notes: bool, tmp_path: Path) -> None:
    big = MediaCache(tmp_path / "cache", CacheLimits(max_blob_bytes=64 << 20))
    screens = [screenshot_png(1400, 900, seed=s) for s in (1, 2, 3)]
    original = {
        "content": [{"type": "image", "data": b64(d), "mimeType": "image/png"} for d in screens]
    }
    rendered = ingest(original, cache=big)
    said = {m.sha256: ["[about it]"] for m in rendered.media} if notes else {}
    limits = FitLimits(max_side=1400, max_result_bytes=300_000)  # sent as they are, or links
    policy = RewritePolicy(images=MediaPolicy.FIT, fit=limits, tag_sent=False)
    out = rewrite_result(original, rendered, said, policy)
    assert len(json.dumps(out, separators=(",", ":")).encode()) + ENVELOPE_BYTES <= 300_000
    content = out["content"]
    by_uri = {f"mcp-media://media/{m.sha256}": m for m in rendered.media}
    links = [i for i, b in enumerate(content) if b["type"] == "resource_link"]
    assert links and any(b["type"] == "image" for b in content)
    for index in links:
        blob = by_uri[content[index]["uri"]]
        under = content[index + 1]["text"].split("\n")
        assert under[0] == f"MEDIA:{blob.path}", content[index + 1]
    sent = [m for m in rendered.media if f"mcp-media://media/{m.sha256}" not in
            {content[i]["uri"] for i in links}]  # fmt: skip
    for blob in sent:  # still sent as an image: the client writes the line
        assert f"MEDIA:{blob.path}" not in _texts(out)


def test_auto_leaves_our_line_out_only_for_a_client_named_hermes() -> None:
    assert not tag_sent(SentMediaTag.AUTO, HERMES)
    assert not tag_sent(SentMediaTag.AUTO, ClientName("Hermes", "1"))
    for other in (ClientName("claude-code", "2.1.0"), SDK_DEFAULT, None):
        assert tag_sent(SentMediaTag.AUTO, other)
    assert tag_sent(SentMediaTag.ALWAYS, HERMES)
    assert not tag_sent(SentMediaTag.OMIT, SDK_DEFAULT)
    assert DoorOptions().policy_for(HERMES).tag_sent is False
    assert DoorOptions().policy_for(SDK_DEFAULT) == RewritePolicy()


def test_the_client_is_read_from_its_initialize() -> None:
    info = argparse.Namespace(name="mcp", version="0.1.0")
    connection = argparse.Namespace(client_params=argparse.Namespace(client_info=info))
    assert client_named(connection) == SDK_DEFAULT
    assert client_named(argparse.Namespace(client_params=None)) is None
    assert client_named(None) is None


def test_the_flag_beats_the_setting_and_the_setting_beats_auto(tmp_path: Path) -> None:
    from workers.cli.main import build_parser
    from workers.cli.mcp import door_options

    parser = build_parser()
    home = {"MCP_MEDIA_HOME": str(tmp_path)}
    set_omit = Settings.from_env({**home, "MCP_MEDIA_MCP__SENT_MEDIA_TAG": "omit"})
    plain = parser.parse_args(["proxy", "--", "x"])
    assert door_options(plain, Settings.from_env(home)).sent_media_tag is SentMediaTag.AUTO
    assert door_options(plain, set_omit).sent_media_tag is SentMediaTag.OMIT
    given = parser.parse_args(["proxy", "--sent-media-tag", "always", "--", "x"])
    assert door_options(given, set_omit).sent_media_tag is SentMediaTag.ALWAYS
    with pytest.raises(SystemExit):
        parser.parse_args(["proxy", "--sent-media-tag", "never", "--", "x"])
