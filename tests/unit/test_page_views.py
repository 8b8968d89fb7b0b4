"""The jobs page's HTML and session rules, without services: untrusted text never becomes
markup, and the cookie and CSRF token are derived from the key without being it."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request

from workers.api.errors import ApiError
from workers.api.page import views
from workers.api.page.session import COOKIE, Session

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
    assert f'<audio controls preload=none src="/page/media/{spoken}">' in html


def request(cookie: str | None = None, **headers: str) -> Request:
    raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    raw.append((b"host", b"127.0.0.1:8000"))
    if cookie is not None:
        raw.append((b"cookie", f"{COOKIE}={cookie}".encode()))
    scope = {"type": "http", "method": "POST", "path": "/page/pause", "headers": raw}
    return Request(scope)


def test_the_cookie_and_token_come_from_the_key_and_are_checked() -> None:
    key = "k" * 32
    session = Session(key)
    assert key not in session.cookie_value and session.cookie_value != session.csrf
    assert Session("x" * 32).cookie_value != session.cookie_value
    assert session.logged_in(request(session.cookie_value))
    assert not session.logged_in(request(key))
    session.check_action(request(session.cookie_value, x_csrf_token=session.csrf), None)
    session.check_action(request(session.cookie_value), session.csrf)
    refusals = [
        (request(), session.csrf, 401),
        (request(session.cookie_value), None, 403),
        (request(session.cookie_value), "0" * 64, 403),
        (request(session.cookie_value, origin="http://evil.example"), session.csrf, 403),
        (request(session.cookie_value, origin="null"), session.csrf, 403),
    ]
    for req, token, status in refusals:
        with pytest.raises(ApiError) as refused:
            session.check_action(req, token)
        assert refused.value.status == status
    session.check_action(
        request(session.cookie_value, origin="http://127.0.0.1:8000"), session.csrf
    )
