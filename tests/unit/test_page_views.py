"""The jobs page's HTML, without services: untrusted text never becomes markup (the session
rules are in test_page_sessions)."""

from __future__ import annotations

from typing import Any

import pytest

from workers.doors.api.page import views

pytestmark = pytest.mark.unit

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
SHA = "ab" * 32


def envelope(capability: str, output: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    return {
        "status": "done" if reason is None else "degraded",
        "capability": capability,
        "sha256": SHA,
        "processor_version": "0123456789ab",
        "output": output,
        "meta": {"job_id": "job-1", "reason": reason},
    }


def test_summaries_transcripts_and_reasons_are_text_never_markup() -> None:
    html = "".join(
        (
            views.result_item(envelope("vision.summarize", {"summary": HOSTILE})),
            views.result_item(envelope("audio.transcribe", {"text": HOSTILE})),
            views.result_item(envelope("vision.summarize", {}, reason=HOSTILE)),
            views.dead_fragment(
                [{"job_id": HOSTILE, "key": f"vision.summarize:0a:{SHA}", "reason": HOSTILE}],
                "token",
            ),
        )
    )
    assert "<script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert f'src="/page/media/{SHA}"' in html  # media only by sha256, from the page itself


def test_a_spoken_reply_plays_the_audio_it_produced() -> None:
    spoken = "cd" * 32
    html = views.result_item(
        envelope("audio.synthesize", {"audio_sha256": spoken, "duration_s": 1.5})
    )
    assert f'<audio controls preload=metadata src="/page/media/{spoken}">' in html
