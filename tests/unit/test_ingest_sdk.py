"""Ingest on the JSON the official MCP SDK produces, in both spellings."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines import MediaCache, ingest
from pipelines.media import Capability, MediaKind
from tests.support.sdk_results import dumps

pytestmark = pytest.mark.unit

SPELLINGS = ["2.x", "1.x"]


@pytest.fixture(scope="module")
def sdk() -> dict[str, dict[str, dict[str, Any]]]:
    return dumps()


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_structured_content_passes_through_beside_its_text_copy(
    sdk: dict[str, dict[str, dict[str, Any]]], spelling: str, cache: MediaCache
) -> None:
    out = ingest(sdk["typed_rows"][spelling], cache=cache)
    assert out.structured_content == {"rows": [1, 2], "ok": True}
    assert '"rows"' in out.text  # the SDK's text copy is still there for text-only clients
    assert not out.is_error


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_error_result_keeps_its_image(
    sdk: dict[str, dict[str, dict[str, Any]]], spelling: str, cache: MediaCache
) -> None:
    out = ingest(sdk["error_with_image"][spelling], cache=cache)
    assert out.is_error
    (image,) = out.media
    assert image.kind is MediaKind.IMAGE and image.path.is_file()
    assert out.text.splitlines() == ["render failed", f"MEDIA:{image.path}"]
    assert [j.capability for j in out.jobs] == [Capability.VISION_SUMMARIZE]
    assert out.media_blocks == (1,)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_embedded_image_and_audio_are_media_with_jobs(
    sdk: dict[str, dict[str, dict[str, Any]]], spelling: str, cache: MediaCache
) -> None:
    out = ingest(sdk["embedded_media"][spelling], cache=cache)
    assert [m.kind for m in out.media] == [MediaKind.IMAGE, MediaKind.AUDIO]
    assert {j.capability for j in out.jobs} == {
        Capability.VISION_SUMMARIZE,
        Capability.AUDIO_TRANSCRIBE,
    }
    lines = out.text.splitlines()
    assert lines[0] == "[MCP resource screen://shot/1 (image/png)]"
    assert lines[1] == f"MEDIA:{out.media[0].path}"
    assert lines[2] == "[MCP resource mic://clip/1 (audio/wav)]"
    assert lines[3] == f"MEDIA:{out.media[1].path}"
    assert out.media_blocks == (0, 1)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_embedded_text_names_its_uri_and_type(
    sdk: dict[str, dict[str, dict[str, Any]]], spelling: str, cache: MediaCache
) -> None:
    out = ingest(sdk["embedded_text"][spelling], cache=cache)
    assert out.text.splitlines() == [
        "[MCP resource file:///notes/todo.md (text/markdown)]",
        "- ship it",
    ]
    assert out.media == ()
