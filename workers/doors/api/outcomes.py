"""The HTTP door's one table from outcome codes to answers: an HTTP status and an OpenAI error
`code`, for a job that did not end `done` and for the door's own refusals and faults alike.
A code this version does not know, or a result that names none, is a 500 `job_failed`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipelines.outcomes import Outcome
from pipelines.results import Envelope
from workers.doors.api.errors import ApiError


@dataclass(frozen=True, slots=True)
class HttpShape:
    status: int
    code: str  # OpenAI's `error.code`
    param: str | None = None  # the request field to blame
    retry: bool = False  # worth retrying as it is, later: said with a Retry-After
    hint: str = ""  # what to do, after the message of a refusal or fault of the door's own
    # The message of a job's answer: `{job}` its id, `{status}` its status, `{reason}` its
    # reason (text for people, passed on, never read).
    job_message: str = "{reason}"


_UNREADABLE = HttpShape(415, "unreadable_audio", "file", job_message="unreadable audio: {reason}")
_INVALID = HttpShape(400, "invalid_request")
_UNAVAILABLE = HttpShape(503, "service_unavailable")
FAILED = HttpShape(500, "job_failed", job_message="job {job} {status}: {reason}")

HTTP: Mapping[Outcome, HttpShape] = {
    Outcome.NOT_AUDIO: _UNREADABLE,
    Outcome.UNREADABLE_AUDIO: _UNREADABLE,
    Outcome.EMPTY_AUDIO: _UNREADABLE,
    Outcome.AUDIO_TOO_LONG: _UNREADABLE,
    Outcome.AUDIO_TOO_LARGE: HttpShape(413, "upload_too_large", "file"),
    Outcome.UNREADABLE_IMAGE: FAILED,
    Outcome.IMAGE_TOO_LARGE: FAILED,
    Outcome.EMPTY_TEXT: _INVALID,
    Outcome.TEXT_TOO_LONG: _INVALID,
    Outcome.INVALID_INPUT: _INVALID,
    Outcome.ENCRYPTED_DOCUMENT: FAILED,
    Outcome.UNREADABLE_DOCUMENT: FAILED,
    Outcome.EMPTY_DOCUMENT: FAILED,
    Outcome.DOCUMENT_TOO_LARGE: FAILED,
    Outcome.UNSUPPORTED: _INVALID,
    Outcome.BAD_CONFIGURATION: _INVALID,
    Outcome.MODEL_MISSING: _UNAVAILABLE,  # the server's to prepare, not the request's fault
    Outcome.SKIPPED: FAILED,
    Outcome.TIMEOUT: HttpShape(504, "job_timeout", job_message="job {job} timed out: {reason}"),
    Outcome.PROVIDER_UNAVAILABLE: _UNAVAILABLE,
    Outcome.PROVIDER_BUSY: _UNAVAILABLE,
    Outcome.PROVIDER_REJECTED: FAILED,
    Outcome.ENGINE_FAILED: FAILED,
    Outcome.UNAVAILABLE: _UNAVAILABLE,
    Outcome.DISK_FULL: HttpShape(
        507,
        "insufficient_storage",
        hint="free space there and retry",
        job_message="job {job} could not store its output: {reason}; free space on the "
        "workers' disk and retry",
    ),
    Outcome.CANCELLED: FAILED,
    Outcome.VERSION_MISMATCH: FAILED,
    Outcome.DEAD_LETTERED: FAILED,
    Outcome.RETRIES_EXHAUSTED: FAILED,
    Outcome.MALFORMED_JOB: FAILED,
    Outcome.INPUT_MISSING: FAILED,
    Outcome.BROKER_UNAVAILABLE: HttpShape(503, "broker_unavailable", retry=True),
    Outcome.BROKER_CANNOT_PERSIST: HttpShape(503, "broker_cannot_persist", retry=True),
    Outcome.NO_WORKER: HttpShape(503, "no_worker"),
    Outcome.QUEUE_FULL: HttpShape(429, "queue_full", retry=True),
    Outcome.QUEUE_BUSY: HttpShape(429, "rate_limit_exceeded", retry=True),
    Outcome.INTERNAL: FAILED,
}


def shape(outcome: Outcome | None) -> HttpShape:
    return HTTP.get(outcome, FAILED) if outcome is not None else FAILED


def http_error(
    outcome: Outcome,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    retry_after: int | None = None,
) -> ApiError:
    """The answer to a refusal or fault named by `outcome`, with `message` for people; a
    Retry-After of `retry_after` seconds where the code is worth retrying."""
    found = shape(outcome)
    said = dict(headers or {})
    if found.retry and retry_after is not None:
        said["Retry-After"] = str(retry_after)
    text = f"{message}; {found.hint}" if found.hint else message
    return ApiError(found.status, text, param=found.param, code=found.code, headers=said)


def job_error(envelope: Envelope, job_id: str) -> ApiError:
    """The answer to a job that ended without its output, by the code its result carries."""
    found = shape(envelope.outcome)
    reason = envelope.reason or envelope.status.value
    message = found.job_message.format(job=job_id, status=envelope.status.value, reason=reason)
    return ApiError(found.status, message, param=found.param, code=found.code)
