"""The Wyoming door's one table from outcome codes to what a client is told: an `error`
event whose `code` is the outcome code and whose text says what happened, then what the
client can do about it. A code this version does not know gets no advice."""

from __future__ import annotations

from collections.abc import Mapping

from wyoming.error import Error
from wyoming.event import Event

from pipelines.outcomes import Outcome
from pipelines.render import failure_text
from pipelines.results import Envelope
from workers.core.gateway import JobGateway
from workers.core.outcomes import Failure, server_failure

# What a client can do, by the outcomes it follows: every code is in one group.
_GROUPS: Mapping[str, frozenset[Outcome]] = {
    "the same input will fail again": frozenset({
        Outcome.NOT_AUDIO, Outcome.UNREADABLE_AUDIO, Outcome.EMPTY_AUDIO,
        Outcome.UNREADABLE_IMAGE, Outcome.IMAGE_TOO_LARGE, Outcome.PROVIDER_REJECTED,
        Outcome.ENGINE_FAILED, Outcome.UNREADABLE_DOCUMENT, Outcome.EMPTY_DOCUMENT,
        Outcome.ENCRYPTED_DOCUMENT, Outcome.DOCUMENT_TOO_LARGE,
    }),
    "send smaller audio chunks, or less audio": frozenset({Outcome.AUDIO_TOO_LARGE}),
    "send a shorter recording": frozenset({Outcome.AUDIO_TOO_LONG}),
    "send a shorter text": frozenset({Outcome.TEXT_TOO_LONG}),
    "change the request before trying again": frozenset({
        Outcome.EMPTY_TEXT, Outcome.INVALID_INPUT, Outcome.BAD_CONFIGURATION,
    }),
    "ask for a model, voice or language that `describe` lists": frozenset({Outcome.UNSUPPORTED}),
    "the workers have this turned off": frozenset({Outcome.SKIPPED}),
    "try again later": frozenset({
        Outcome.TIMEOUT, Outcome.PROVIDER_UNAVAILABLE, Outcome.PROVIDER_BUSY,
        Outcome.UNAVAILABLE, Outcome.RETRIES_EXHAUSTED, Outcome.BROKER_UNAVAILABLE,
        Outcome.BROKER_CANNOT_PERSIST, Outcome.QUEUE_FULL, Outcome.QUEUE_BUSY, Outcome.INTERNAL,
    }),
    "send it again": frozenset({
        Outcome.VERSION_MISMATCH, Outcome.MALFORMED_JOB, Outcome.INPUT_MISSING,
    }),
    "the server's disk is full: free space there and try again": frozenset({Outcome.DISK_FULL}),
    "it stopped its worker each time: do not retry it as it is": frozenset({
        Outcome.DEAD_LETTERED,
    }),
    "start a worker for it (`mcp-media up`)": frozenset({Outcome.NO_WORKER}),
    "prepare the model where the jobs run (`mcp-media models prepare`)": frozenset({
        Outcome.MODEL_MISSING,
    }),
    "": frozenset({Outcome.CANCELLED}),
}  # fmt: skip
ADVICE: Mapping[Outcome, str] = {
    outcome: said for said, group in _GROUPS.items() for outcome in group
}


class Refused(Exception):
    """A request the door answers with an `error` event (the connection stays open)."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.failure = Failure(outcome, message)


def error_event(failure: Failure) -> Event:
    said = ADVICE.get(failure.outcome, "")
    text = " ".join(failure.message.split())
    return Error(text=f"{text} — {said}" if said else text, code=failure.outcome.value).event()


def job_failure(envelope: Envelope, job_id: str) -> Refused:
    """A job that ended without its output, as the error its code deserves."""
    outcome = envelope.outcome or Outcome.INTERNAL
    return Refused(outcome, f"job {job_id} {envelope.status.value}: {failure_text(envelope)}")


def door_failure(exc: BaseException, gateway: JobGateway) -> Failure:
    """The server's fault `exc` names (a full disk, the broker), else an internal error
    named by its type."""
    found = server_failure(exc, gateway.settings.cache_root, gateway.fault)
    if found is not None:
        return found
    message = " ".join(str(exc).split())
    return Failure(
        Outcome.INTERNAL, f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    )
