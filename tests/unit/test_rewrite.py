"""Rewriting a tool result for the model: every policy, nothing dropped, wire spelling out."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from pipelines import MediaCache, ingest
from pipelines.media import MediaKind
from pipelines.render import job_notes
from pipelines.results import Envelope, ResultKey, Status
from pipelines.rewrite import MediaPolicy, RewritePolicy, media_uri, rewrap, rewrite_result
from tests.support.factories import audio_block, image_block, png_bytes, result, wav_bytes
from workers.gateways.cluster import JobHandle

pytestmark = pytest.mark.unit

PDF = b"%PDF-1.4\n" + b"0" * 4000


def sample() -> dict[str, Any]:
    return result(
        {"type": "text", "text": "here you go"},
        image_block(png_bytes()),
        audio_block(wav_bytes(), "audio/wav"),
        {
            "type": "resource",
            "resource": {
                "uri": "file:///big.pdf",
                "mimeType": "application/pdf",
                "blob": base64.b64encode(PDF).decode(),
            },
        },
        {"type": "hologram", "data": "?"},
        {"type": "resource_link", "uri": "drive://x", "name": "x"},
        structuredContent={"rows": 2},
        isError=False,
    )


def done_summary(sha: str, path: Path) -> JobHandle:
    key = ResultKey.parse(f"vision.summarize:abc:{sha}")
    envelope = Envelope(Status.DONE, key, {"summary": "A red square."})
    return JobHandle("job-1", key, path, Status.DONE, envelope)


def rewritten(cache: MediaCache, policy: RewritePolicy) -> tuple[list[dict[str, Any]], Any]:
    original = sample()
    rendered = ingest(original, cache=cache)
    image, audio = rendered.media[0], rendered.media[1]
    transcript_key = ResultKey.parse(f"audio.transcribe:abc:{audio.sha256}")
    handles = [
        done_summary(image.sha256, image.path),
        JobHandle("job-2", transcript_key, audio.path, Status.PENDING),
    ]
    out = rewrite_result(original, rendered, job_notes(handles, "media_result({id})"), policy)
    return out["content"], (out, rendered)


def test_keep_forwards_media_and_adds_its_text(cache: MediaCache) -> None:
    content, (out, rendered) = rewritten(cache, RewritePolicy(inline_max=1 << 20))
    image, audio, pdf = rendered.media
    assert [b["type"] for b in content] == [
        "text", "image", "text", "audio", "text", "resource", "text", "hologram", "text",
        "resource_link",
    ]  # fmt: skip
    assert content[1] == sample()["content"][1]  # the pixels, as they came
    assert content[2]["text"].startswith(f"MEDIA:{image.path}\n[Image summary")
    assert "A red square." in content[2]["text"]
    assert content[4]["text"] == (
        f"MEDIA:{audio.path}\n[audio.transcribe job job-2 still running — get it later with: "
        "media_result(job-2)]"
    )
    assert content[6]["text"].startswith(f"[MCP resource saved to {pdf.path}")
    assert "unsupported" in content[8]["text"] and "hologram" in content[8]["text"]
    assert out["structuredContent"] == {"rows": 2} and out["isError"] is False


def test_text_replaces_the_bytes(cache: MediaCache) -> None:
    content, _ = rewritten(cache, RewritePolicy(MediaPolicy.TEXT, MediaPolicy.TEXT))
    assert "image" not in [b["type"] for b in content]
    assert "audio" not in [b["type"] for b in content]
    assert sum(b["type"] == "text" and b["text"].startswith("MEDIA:") for b in content) == 2


def test_link_points_at_the_cached_bytes(cache: MediaCache) -> None:
    content, (_, rendered) = rewritten(cache, RewritePolicy(MediaPolicy.LINK, MediaPolicy.LINK))
    image = rendered.media[0]
    links = [b for b in content if b["type"] == "resource_link" and b["uri"].startswith("mcp-")]
    assert links[0] == {
        "type": "resource_link",
        "uri": media_uri(image.sha256),
        "name": image.path.name,
        "mimeType": "image/png",
        "size": image.size,
    }
    assert len(links) == 2


def test_large_embedded_blob_becomes_a_link(cache: MediaCache) -> None:
    content, (_, rendered) = rewritten(cache, RewritePolicy(inline_max=1000))
    pdf = rendered.media[2]
    assert pdf.kind is MediaKind.DOCUMENT
    index = next(i for i, b in enumerate(content) if b.get("uri") == media_uri(pdf.sha256))
    assert content[index + 1]["text"].startswith(f"[MCP resource saved to {pdf.path}")
    assert not any(b["type"] == "resource" for b in content)


def test_snake_case_blocks_go_out_in_wire_spelling(cache: MediaCache) -> None:
    data = base64.b64encode(png_bytes()).decode()
    original = {
        "content": [{"type": "image", "data": data, "mime_type": "image/png"}],
        "structured_content": {"a": 1},
        "is_error": True,
    }
    out = rewrite_result(original, ingest(original, cache=cache), {}, RewritePolicy())
    assert out["content"][0] == {"type": "image", "data": data, "mimeType": "image/png"}
    assert out["structuredContent"] == {"a": 1} and out["isError"] is True


def test_rewrap_restores_the_json_rpc_envelope() -> None:
    wrapped = {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}
    assert rewrap(wrapped, {"content": [1]}) == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"content": [1]},
    }
    assert rewrap({"content": []}, {"content": [1]}) == {"content": [1]}
