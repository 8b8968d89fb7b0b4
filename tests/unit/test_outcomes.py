"""Outcome codes: each kind of failure names its code where it is raised, results carry it
(and results of the previous version, which carry none, get theirs derived once), Redis
error replies are read by their error code, and every door maps every code through its one
table, with a sane answer for a code it does not know."""

from __future__ import annotations

import errno
import importlib
import json
from pathlib import Path

import pytest
import redis

from pipelines.errors import (
    ConfigError,
    MediaError,
    PermanentError,
    Skipped,
    Stopped,
    TransientError,
    Unsupported,
    outcome_of,
)
from pipelines.media import BlobError, Capability, MarkerReason
from pipelines.outcomes import Outcome
from pipelines.render import result_note
from pipelines.results import Envelope, ResultKey, Sidecars, Status, legacy_outcome
from pipelines.speech.audio import (
    AudioDecodeError,
    AudioDecodeTimeoutError,
    AudioEncodeError,
    AudioLimitError,
    AudioTooLargeError,
    AudioTooLongError,
    EmptyAudioError,
    NotAudioError,
)
from pipelines.speech.text import EmptyTextError, TextTooLongError
from pipelines.speech.tts import SynthesisError, VoiceError
from pipelines.vision import DegradedReason, ProviderRejected, ProviderUnavailable
from workers.broker.replies import BrokerUnwritable, broker_outcome, error_code
from workers.cli.outcomes import EXIT, EXIT_FAILED, EXIT_LATER, exit_status
from workers.core.gateway import QueueBusy, QueueFull
from workers.core.outcomes import server_failure
from workers.doors.api.errors import ApiError
from workers.doors.api.outcomes import FAILED, HTTP, http_error, job_error, shape
from workers.doors.mcp.outcomes import ADVICE, advice, door_failure, job_line, tool_error
from workers.files.blobs import BlobMissing
from workers.jobs.execute import MalformedJob
from workers.state.cancellation import Cancelled

pytestmark = pytest.mark.unit

KEY = ResultKey(Capability.AUDIO_TRANSCRIBE, "ab12", "0" * 64)

ERRORS: list[tuple[BaseException, Outcome]] = [
    (NotAudioError("no audio stream"), Outcome.NOT_AUDIO),
    (AudioDecodeError("corrupt"), Outcome.UNREADABLE_AUDIO),
    (AudioDecodeTimeoutError("slow"), Outcome.UNREADABLE_AUDIO),
    (AudioLimitError("64 channels"), Outcome.UNREADABLE_AUDIO),
    (EmptyAudioError("0 bytes"), Outcome.EMPTY_AUDIO),
    (AudioTooLargeError("big"), Outcome.AUDIO_TOO_LARGE),
    (AudioTooLongError("long"), Outcome.AUDIO_TOO_LONG),
    (AudioEncodeError("no samples"), Outcome.ENGINE_FAILED),
    (EmptyTextError("nothing to speak"), Outcome.EMPTY_TEXT),
    (TextTooLongError("long"), Outcome.TEXT_TOO_LONG),
    (SynthesisError("silence"), Outcome.ENGINE_FAILED),
    (VoiceError("no voice 'x'"), Outcome.UNSUPPORTED),
    (Unsupported("blends need the native engine"), Outcome.UNSUPPORTED),
    (ConfigError("model missing"), Outcome.BAD_CONFIGURATION),
    (PermanentError("speed 9"), Outcome.INVALID_INPUT),
    (TransientError("busy"), Outcome.UNAVAILABLE),
    (MediaError("?"), Outcome.INTERNAL),
    (Skipped("turned off"), Outcome.SKIPPED),
    (Stopped("asked"), Outcome.CANCELLED),
    (Cancelled("asked"), Outcome.CANCELLED),
    (BlobMissing("nowhere"), Outcome.INPUT_MISSING),
    (MalformedJob("no input"), Outcome.MALFORMED_JOB),
    (BlobError(MarkerReason.NOT_AUDIO, "html"), Outcome.NOT_AUDIO),
    (BlobError(MarkerReason.NOT_IMAGE, "html"), Outcome.UNREADABLE_IMAGE),
    (BlobError(MarkerReason.CACHE_ERROR, "cache error"), Outcome.INTERNAL),
    (ProviderUnavailable(DegradedReason.HTTP_ERROR, "HTTP 503"), Outcome.PROVIDER_UNAVAILABLE),
    (ProviderUnavailable(DegradedReason.TIMEOUT, "no answer"), Outcome.TIMEOUT),
    (ProviderRejected(DegradedReason.HTTP_ERROR, "HTTP 400"), Outcome.PROVIDER_REJECTED),
    (QueueFull("stt", 9, 8), Outcome.QUEUE_FULL),
    (QueueBusy("stt", 90.0, 30.0), Outcome.QUEUE_BUSY),
    (RuntimeError("a bug"), Outcome.INTERNAL),
]


@pytest.mark.parametrize(("error", "code"), ERRORS, ids=lambda v: type(v).__name__)
def test_each_kind_of_error_names_its_code(error: BaseException, code: Outcome) -> None:
    assert outcome_of(error) is code


def _behind(error: BaseException, number: int) -> BaseException:
    try:
        raise OSError(number, "No space left on device", "/home/x/cache/audio/.tmp-1")
    except OSError as exc:
        error.__cause__ = exc
    return error


def test_a_full_disk_is_disk_full_whatever_wraps_it_and_whatever_else_it_is() -> None:
    for number in (errno.ENOSPC, errno.EDQUOT):
        assert outcome_of(_behind(BlobError(MarkerReason.CACHE_ERROR, "x"), number)) is (
            Outcome.DISK_FULL
        )
        assert outcome_of(_behind(NotAudioError("x"), number)) is Outcome.DISK_FULL
    assert outcome_of(_behind(RuntimeError("x"), errno.EACCES)) is Outcome.INTERNAL


def test_a_result_carries_its_code_through_json_and_a_done_one_none() -> None:
    failed = Envelope(Status.FAILED, KEY, {}, reason="NotAudioError: x", outcome=Outcome.NOT_AUDIO)
    data = failed.to_json()
    assert data["meta"]["outcome"] == "not_audio"
    assert Envelope.from_json(json.loads(json.dumps(data))) == failed
    done = Envelope(Status.DONE, KEY, {"text": "hi"})
    assert done.to_json()["meta"]["outcome"] is None
    assert Envelope.from_json(done.to_json()).outcome is None


def test_a_sidecar_of_the_previous_version_reads_with_its_code_derived(tmp_path: Path) -> None:
    """The previous version wrote no `outcome`: its reason's head says which it is."""
    sidecars = Sidecars(tmp_path)
    old = {
        "status": "failed",
        "capability": "audio.transcribe",
        "sha256": "0" * 64,
        "processor_version": "ab12",
        "output": {},
        "meta": {
            "job_id": "j1",
            "worker": "w",
            "attempts": 1,
            "elapsed_ms": 3,
            "reason": "NotAudioError: no audio stream in the mp3 container",
            "trace_id": None,
            "started_at": None,
        },
    }
    sidecars.path(KEY).parent.mkdir(parents=True)
    sidecars.path(KEY).write_text(json.dumps(old), encoding="utf-8")
    read = sidecars.read(KEY)
    assert read is not None and read.outcome is Outcome.NOT_AUDIO
    assert read.reason == old["meta"]["reason"]  # type: ignore[index]
    # A code this version does not know (a newer writer's) is derived the same way.
    newer = {**old, "meta": {**old["meta"], "outcome": "some_future_code"}}  # type: ignore[dict-item]
    assert Envelope.from_json(newer).outcome is Outcome.NOT_AUDIO


@pytest.mark.parametrize(
    ("status", "reason", "code"),
    [
        (Status.FAILED, "disk_full: no space left on the cache volume", Outcome.DISK_FULL),
        (Status.FAILED, "BlobError: cache error: No space left on device", Outcome.DISK_FULL),
        (Status.FAILED, "OSError: [Errno 122] Disk quota exceeded: '/x'", Outcome.DISK_FULL),
        (Status.FAILED, "AudioDecodeError: audio data is corrupt", Outcome.UNREADABLE_AUDIO),
        (Status.FAILED, "AudioTooLongError: longer than 3600 s", Outcome.AUDIO_TOO_LONG),
        (Status.FAILED, "EmptyTextError: nothing to speak", Outcome.EMPTY_TEXT),
        (Status.FAILED, "TextTooLongError: over 20000", Outcome.TEXT_TOO_LONG),
        (Status.FAILED, "ConfigError: whisper knows no language 'xx'", Outcome.BAD_CONFIGURATION),
        (Status.FAILED, "cancelled: the client cancelled the job", Outcome.CANCELLED),
        (Status.FAILED, "processor version mismatch: submitted a", Outcome.VERSION_MISMATCH),
        (Status.FAILED, "dead-lettered: delivered 4 times (cap 3)", Outcome.DEAD_LETTERED),
        (Status.FAILED, "gave up after 12 retries: claimed", Outcome.RETRIES_EXHAUSTED),
        (Status.FAILED, "malformed message: not a blob", Outcome.MALFORMED_JOB),
        (Status.FAILED, "RuntimeError: a bug", Outcome.INTERNAL),
        (Status.FAILED, None, Outcome.INTERNAL),
        (Status.DEGRADED, "timeout: provider did not answer", Outcome.TIMEOUT),
        (Status.DEGRADED, "skipped: vision provider is 'none'", Outcome.SKIPPED),
        (Status.DEGRADED, "provider_busy: no provider slot became free", Outcome.PROVIDER_BUSY),
        (Status.DEGRADED, "decompression_bomb: 3600000000 pixels", Outcome.IMAGE_TOO_LARGE),
        (Status.DONE, None, None),
        (Status.PENDING, None, None),
    ],
)
def test_the_old_reasons_name_their_codes(
    status: Status, reason: str | None, code: Outcome | None
) -> None:
    assert legacy_outcome(status, reason) is code


def _parsed(reply: str) -> redis.ResponseError:
    """An error reply (without its leading `-`) as redis-py turns it into an exception."""
    parser = importlib.import_module("redis._parsers.base").BaseParser
    found: redis.ResponseError = parser.parse_error(reply)
    return found


def test_redis_error_replies_are_read_by_their_error_code() -> None:
    misconf = "MISCONF Redis is configured to save RDB snapshots, but it is currently not able"
    plain = redis.ResponseError(misconf)  # as an older redis-py leaves it
    parsed = _parsed(misconf)  # the client kept the code apart (`status_code`)
    redis6 = _parsed(
        "ERR Error running script (call to f_b0e7): @user_script:1: @user_script: 1: -" + misconf
    )
    stripped = _parsed("READONLY You can't write against a read only replica.")
    wrong = _parsed("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert [error_code(e) for e in (plain, parsed, redis6, stripped, wrong)] == [
        "MISCONF",
        "MISCONF",
        "MISCONF",
        "READONLY",
        "WRONGTYPE",
    ]
    assert error_code(redis.ResponseError("no code here")) is None
    # Words in a message are not a code: only the reply's first word is.
    assert error_code(redis.ResponseError("ERR a value mentions MISCONF")) == "ERR"
    assert [broker_outcome(e) for e in (plain, redis6, BrokerUnwritable("MISCONF"))] == [
        Outcome.BROKER_CANNOT_PERSIST
    ] * 3
    assert broker_outcome(redis.ConnectionError("refused")) is Outcome.BROKER_UNAVAILABLE
    assert broker_outcome(redis.TimeoutError("slow")) is Outcome.BROKER_UNAVAILABLE
    assert broker_outcome(wrong) is None and broker_outcome(ValueError("x")) is None


def test_every_code_has_an_http_answer_and_an_unknown_one_is_a_500() -> None:
    assert set(HTTP) == set(Outcome)
    assert all(100 <= found.status < 600 and found.code for found in HTTP.values())
    assert shape(None) is FAILED and (FAILED.status, FAILED.code) == (500, "job_failed")
    assert shape("from_a_newer_version") is FAILED  # type: ignore[arg-type]
    expected = {
        Outcome.NOT_AUDIO: (415, "unreadable_audio"),
        Outcome.UNREADABLE_AUDIO: (415, "unreadable_audio"),
        Outcome.EMPTY_TEXT: (400, "invalid_request"),
        Outcome.BAD_CONFIGURATION: (400, "invalid_request"),
        Outcome.DISK_FULL: (507, "insufficient_storage"),
        Outcome.TIMEOUT: (504, "job_timeout"),
        Outcome.BROKER_CANNOT_PERSIST: (503, "broker_cannot_persist"),
        Outcome.QUEUE_BUSY: (429, "rate_limit_exceeded"),
        Outcome.INTERNAL: (500, "job_failed"),
    }
    for code, answer in expected.items():
        assert (HTTP[code].status, HTTP[code].code) == answer


def test_the_http_door_answers_a_job_by_its_code_never_by_its_reason() -> None:
    """A reason that reads like another failure changes nothing: the code decides."""
    misleading = "NotAudioError: No space left on device [Errno 28]"
    for code, status in ((Outcome.EMPTY_TEXT, 400), (Outcome.NOT_AUDIO, 415), (None, 500)):
        envelope = Envelope(Status.FAILED, KEY, {}, reason=misleading, outcome=code)
        error = job_error(envelope, "j1")
        assert error.status == status and misleading in error.message
    refused = http_error(Outcome.QUEUE_FULL, "the queue is full", retry_after=5)
    assert (refused.status, refused.headers) == (429, {"Retry-After": "5"})
    assert http_error(Outcome.NO_WORKER, "no worker", retry_after=5).headers == {}


def test_every_code_has_mcp_advice_and_an_unknown_one_none() -> None:
    assert set(ADVICE) == set(Outcome)
    assert advice(None) == "" and advice("from_a_newer_version") == ""  # type: ignore[arg-type]
    timed_out = Envelope(
        Status.DEGRADED,
        ResultKey(Capability.VISION_SUMMARIZE, "ab12", "0" * 64),
        {},
        reason="timeout: provider did not answer",
        outcome=Outcome.TIMEOUT,
    )
    assert result_note(timed_out, ADVICE) == (
        "[image summary unavailable: timeout: provider did not answer — try again later]"
    )
    assert result_note(timed_out) == "[image summary unavailable: timeout: provider did not answer]"
    assert job_line(timed_out) == "[degraded: timeout: provider did not answer — try again later]"


def test_every_code_has_a_cli_exit_and_an_unknown_one_fails() -> None:
    assert set(EXIT) == set(Outcome)
    assert exit_status(None) == EXIT_FAILED == 1
    assert exit_status(Outcome.NOT_AUDIO) == EXIT_FAILED
    assert exit_status(Outcome.TIMEOUT) == exit_status(Outcome.DISK_FULL) == EXIT_LATER == 75


def test_both_doors_say_a_full_disk_they_meet_with_one_meaning(tmp_path: Path) -> None:
    """The MCP door's own tools and the HTTP door answer a full disk alike: the disk-full
    code, the OS's words and the folder; never an errno."""
    full = _behind(BlobError(MarkerReason.CACHE_ERROR, "cache error"), errno.ENOSPC)
    failure = server_failure(full, tmp_path, None)
    assert failure is not None and failure.outcome is Outcome.DISK_FULL
    text = tool_error("transcribe_audio", door_failure(full))
    assert text.startswith("transcribe_audio: the job could not be run (disk_full: ")
    assert "No space left on device under /home/x/cache/audio" in text and "Errno" not in text
    answer = http_error(failure.outcome, failure.message)
    assert isinstance(answer, ApiError) and (answer.status, answer.code) == (
        507,
        "insufficient_storage",
    )
    assert failure.message in answer.message and "free space there and retry" in answer.message
    bug = door_failure(RuntimeError("boom"))
    assert bug.outcome is Outcome.INTERNAL
    assert tool_error("speak", bug) == "speak: the job could not be run (RuntimeError: boom); " + (
        "try again later"
    )


def test_the_reference_table_says_what_the_doors_do() -> None:
    """docs/outcomes.md lists every code with each door's answer, as the tables give it."""
    doc = (Path(__file__).parents[2] / "docs" / "outcomes.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    assert set(rows) == {code.value for code in Outcome}
    for code in Outcome:
        http, said, exit_code = rows[code.value]
        found = HTTP[code]
        assert http.startswith(f"{found.status} `{found.code}`"), code
        assert ("Retry-After" in http) == found.retry, code
        assert said == (ADVICE[code] or "(nothing)"), code
        assert int(exit_code) == EXIT[code], code
