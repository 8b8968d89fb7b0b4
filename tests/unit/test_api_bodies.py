"""The HTTP door's bounded parser and its fault mapping: every hostile body is a 400 with
its own code, every full disk a 507, whatever wraps it."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from pipelines.media import BlobError, Capability, MarkerReason
from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultKey, Status
from workers.core.outcomes import Failure
from workers.doors.api.bodies import (
    MAX_JSON_DEPTH,
    check_form_type,
    form_text,
    multipart_boundary,
    parse_json,
)
from workers.doors.api.errors import ApiError
from workers.doors.api.faults import disk_full, server_fault
from workers.doors.api.jobs import check_done

pytestmark = pytest.mark.unit


def _code(body: bytes) -> str | None:
    with pytest.raises(ApiError) as caught:
        parse_json(body)
    assert caught.value.status == 400 and caught.value.message
    return caught.value.code


def test_a_plain_speech_body_parses() -> None:
    body = {"input": "Hello — there", "voice": "alloy", "speed": 1.5, "n": [1, {"a": None}]}
    assert parse_json(json.dumps(body, ensure_ascii=False).encode()) == body


def test_nesting_is_bounded_before_the_parser_recurses() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert _code(b'{"input": ' + deep + b"}") == "json_too_deep"
    at_limit = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    assert parse_json(f'{{"a": {at_limit}}}'.encode())["a"] is not None
    over = "{" + '"a": {' * MAX_JSON_DEPTH + "}" * MAX_JSON_DEPTH + "}"
    assert _code(over.encode()) == "json_too_deep"


def test_brackets_inside_strings_and_escaped_quotes_do_not_count() -> None:
    text = "[" * 500 + '\\"' + "{" * 500
    assert parse_json(json.dumps({"input": text}).encode())["input"] == text
    # An unterminated string of escaped quotes: one linear pass, then the parser's 400.
    assert _code(b'{"input": "' + b'\\"' * 100_000) == "invalid_json"


def test_lone_surrogates_in_any_string_name_their_field() -> None:
    for body, param in (
        (b'{"input": "\\ud800 hello"}', "input"),
        (b'{"voice": {"id": "a\\udfffb"}}', "voice.id"),
        (b'{"x": ["ok", "\\udc00"]}', "x[1]"),
        (b'{"\\ud800": 1}', "body"),
    ):
        with pytest.raises(ApiError) as caught:
            parse_json(body)
        assert (caught.value.code, caught.value.param) == ("invalid_text", param)
    # A proper pair of surrogates is one character, and fine.
    assert parse_json(b'{"input": "\\ud83d\\ude00"}')["input"] == "\U0001f600"


def test_numbers_must_be_finite_and_of_sane_length() -> None:
    for body in (
        b'{"speed": 1e999}',
        b'{"speed": -1e999}',
        b'{"speed": NaN}',
        b'{"speed": Infinity}',
        b'{"speed": ' + b"9" * 5000 + b"}",
    ):
        assert _code(body) == "invalid_number", body[:40]


def test_not_utf8_not_json_not_an_object() -> None:
    assert _code(b'{"input": "\xff"}') == "invalid_encoding"
    assert _code(b"{nope") == "invalid_json"
    assert _code(b"[1, 2]") == "invalid_body"


def test_a_multipart_boundary_is_what_rfc_2046_allows() -> None:
    ok = "a" * 70
    assert multipart_boundary(f"multipart/form-data; boundary={ok}") == ok.encode()
    assert multipart_boundary('multipart/form-data; boundary="a b:c"') == b"a b:c"
    for header in (
        "multipart/form-data; boundary=" + "a" * 71,
        "multipart/form-data; boundary=" + "a" * 100_000,
        "multipart/form-data; boundary=",
        "multipart/form-data",
        'multipart/form-data; boundary="ab "',
        "multipart/form-data; boundary=a\x7fb",
    ):
        with pytest.raises(ApiError) as caught:
            multipart_boundary(header)
        assert (caught.value.status, caught.value.code) == (400, "invalid_boundary"), header[:60]
    with pytest.raises(ApiError) as caught:
        multipart_boundary("application/json")
    assert caught.value.code == "invalid_body"
    check_form_type("application/x-www-form-urlencoded")
    with pytest.raises(ApiError):
        check_form_type("multipart/form-data; boundary=" + "b" * 1000)


def test_form_text_is_strict_utf8() -> None:
    assert form_text("héllo".encode(), "language") == "héllo"
    with pytest.raises(ApiError) as caught:
        form_text(b"\xed\xa0\x80", "language")  # a surrogate, as UTF-8 never spells it
    assert (caught.value.code, caught.value.param) == ("invalid_text", "language")


def test_a_full_disk_behind_a_cache_error_is_a_507_naming_the_folder(tmp_path: Path) -> None:
    for number in (errno.ENOSPC, errno.EDQUOT):
        cause = OSError(number, "No space left on device", str(tmp_path / "audio" / ".tmp-1"))
        try:
            try:
                raise cause
            except OSError as exc:
                raise BlobError(MarkerReason.CACHE_ERROR, "cache error while writing") from exc
        except BlobError as wrapped:
            assert disk_full(wrapped) is cause
            shaped = server_fault(wrapped, tmp_path, None, 5)
        assert shaped is not None
        assert (shaped.status, shaped.code) == (507, "insufficient_storage")
        assert str(tmp_path / "audio") in shaped.message
    unnamed = server_fault(OSError(errno.ENOSPC, "No space left on device"), tmp_path, None, 5)
    assert unnamed is not None and str(tmp_path) in unnamed.message
    assert server_fault(OSError(errno.EACCES, "Permission denied"), tmp_path, None, 5) is None
    assert server_fault(ValueError("a bug"), tmp_path, None, 5) is None


def test_a_broker_fault_anywhere_in_the_chain_is_a_503_with_retry_after(tmp_path: Path) -> None:
    class Gone(Exception):
        pass

    def broker(exc: BaseException) -> Failure | None:
        gone = isinstance(exc, Gone)
        return Failure(Outcome.BROKER_UNAVAILABLE, "the broker does not answer") if gone else None

    try:
        try:
            raise Gone()
        except Gone:
            raise RuntimeError("while submitting") from None
    except RuntimeError as exc:
        # Raised while handling it, even with its context hidden: still the broker's fault.
        found = server_fault(exc, tmp_path, broker, 7)
        assert found is not None and found.status == 503
    assert server_fault(RuntimeError("a bug"), tmp_path, broker, 7) is None
    group = ExceptionGroup("tasks", [ValueError("x"), Gone()])
    shaped = server_fault(group, tmp_path, broker, 7)
    assert shaped is not None
    assert (shaped.status, shaped.code, shaped.headers) == (
        503,
        "broker_unavailable",
        {"Retry-After": "7"},
    )


def test_a_job_that_failed_on_a_full_disk_is_a_507_not_a_500() -> None:
    key = ResultKey(Capability.AUDIO_SYNTHESIZE, "ab12", "0" * 64)
    reason = "disk_full: no space left on the cache volume"
    full = Envelope(Status.FAILED, key, {}, job_id="j1", reason=reason, outcome=Outcome.DISK_FULL)
    with pytest.raises(ApiError) as caught:
        check_done(full, "j1")
    assert (caught.value.status, caught.value.code) == (507, "insufficient_storage")
    assert "j1" in caught.value.message and reason in caught.value.message
    # Stored by the previous version, with a reason and no code: the code is derived once.
    for old in (
        "BlobError: cache error while writing: No space left on device",
        "OSError: [Errno 122] Disk quota exceeded: '/home/x/results/tts'",
    ):
        read = Envelope.from_json({**full.to_json(), "meta": {"job_id": "j1", "reason": old}})
        with pytest.raises(ApiError) as caught:
            check_done(read, "j1")
        assert (caught.value.status, caught.value.code) == (507, "insufficient_storage")
        assert "j1" in caught.value.message and old in caught.value.message
    # A code that names nothing else, or none at all: the job failed.
    for code in (Outcome.INTERNAL, None):
        failed = Envelope(
            Status.FAILED, key, {}, job_id="j1", reason="RuntimeError: x", outcome=code
        )
        with pytest.raises(ApiError) as caught:
            check_done(failed, "j1")
        assert (caught.value.status, caught.value.code) == (500, "job_failed")
