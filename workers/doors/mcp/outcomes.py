"""The MCP door's one table from outcome codes to what the model is told: what it can do
about a result that is not done (after the reason, in the marker line under a `MEDIA:` tag
and in an own tool's answer), and the text of an own tool's error answer (`isError`) when
the door itself meets a fault (its disk full, the broker gone), worded as the HTTP door's.
A code this version does not know, or a result that names none, gets no advice."""

from __future__ import annotations

from collections.abc import Mapping

from pipelines.outcomes import Outcome
from pipelines.render import failure_text
from pipelines.results import Envelope
from workers.core.gateway import JobGateway
from workers.core.outcomes import Failure, server_failure

_SAME_INPUT = "the same input will fail again"
_CHANGE = "change the request before trying again"
_LATER = "try again later"
_AGAIN = "submit it again"

ADVICE: Mapping[Outcome, str] = {
    Outcome.NOT_AUDIO: _SAME_INPUT,
    Outcome.UNREADABLE_AUDIO: _SAME_INPUT,
    Outcome.EMPTY_AUDIO: _SAME_INPUT,
    Outcome.AUDIO_TOO_LARGE: _SAME_INPUT,
    Outcome.AUDIO_TOO_LONG: _SAME_INPUT,
    Outcome.UNREADABLE_IMAGE: _SAME_INPUT,
    Outcome.IMAGE_TOO_LARGE: _SAME_INPUT,
    Outcome.EMPTY_TEXT: _CHANGE,
    Outcome.TEXT_TOO_LONG: _CHANGE,
    Outcome.INVALID_INPUT: _CHANGE,
    Outcome.ENCRYPTED_DOCUMENT: "it needs its password: ask for an unlocked copy",
    Outcome.UNREADABLE_DOCUMENT: _SAME_INPUT,
    Outcome.EMPTY_DOCUMENT: _SAME_INPUT,
    Outcome.DOCUMENT_TOO_LARGE: _SAME_INPUT,
    Outcome.UNSUPPORTED: "the workers do not serve this: ask for something they serve",
    Outcome.BAD_CONFIGURATION: "the request or the workers' settings need changing",
    Outcome.MODEL_MISSING: "retrying will not help until the model is prepared",
    Outcome.SKIPPED: "the workers have this turned off",
    Outcome.TIMEOUT: _LATER,
    Outcome.PROVIDER_UNAVAILABLE: _LATER,
    Outcome.PROVIDER_BUSY: _LATER,
    Outcome.PROVIDER_REJECTED: _SAME_INPUT,
    Outcome.ENGINE_FAILED: _SAME_INPUT,
    Outcome.UNAVAILABLE: _LATER,
    Outcome.DISK_FULL: "the server's disk is full: free space there and try again",
    Outcome.CANCELLED: "",
    Outcome.VERSION_MISMATCH: _AGAIN,
    Outcome.DEAD_LETTERED: "it stopped its worker each time: do not retry it as it is",
    Outcome.RETRIES_EXHAUSTED: _LATER,
    Outcome.MALFORMED_JOB: _AGAIN,
    Outcome.INPUT_MISSING: _AGAIN,
    Outcome.BROKER_UNAVAILABLE: _LATER,
    Outcome.BROKER_CANNOT_PERSIST: _LATER,
    Outcome.NO_WORKER: "no worker serves it yet: it runs once one starts",
    Outcome.QUEUE_FULL: _LATER,
    Outcome.QUEUE_BUSY: _LATER,
    Outcome.INTERNAL: _LATER,
}


def advice(outcome: Outcome | None) -> str:
    return ADVICE.get(outcome, "") if outcome is not None else ""


def job_line(envelope: Envelope) -> str:
    """An own tool's line for a job that ended without its output."""
    return f"[{envelope.status.value}: {failure_text(envelope, ADVICE)}]"


def door_failure(exc: BaseException, gateway: JobGateway | None = None) -> Failure:
    """What went wrong when the door itself met `exc`: the server's fault it names (a full
    disk, under the cache when the error names no file; the broker, as the gateway reads
    it), else an internal error named by its type."""
    folder = gateway.settings.cache_root if gateway is not None else None
    found = server_failure(exc, folder, gateway.fault if gateway is not None else None)
    if found is not None:
        return found
    message = " ".join(str(exc).split())
    named = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return Failure(Outcome.INTERNAL, named)


def failure_line(failure: Failure) -> str:
    """A failure the door met, in one line: the code of a fault it names, then what happened
    (a bug: its type and message alone)."""
    said = failure.message
    if failure.outcome is not Outcome.INTERNAL:
        said = f"{failure.outcome.value}: {said}"
    return " ".join(said.split())


def tool_error(name: str, failure: Failure) -> str:
    """The text of an own tool's error answer (`isError`) to a fault the door met."""
    said = advice(failure.outcome)
    tail = f"; {said}" if said else ""
    return f"{name}: the job could not be run ({failure_line(failure)}){tail}"
