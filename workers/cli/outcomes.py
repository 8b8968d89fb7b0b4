"""The CLI's one table from outcome codes to exit statuses: a command whose output is a job's
(describe, transcribe, speak) exits 0 once the job is done, 1 when it ended without its
output, or 75 (sysexits' EX_TEMPFAIL) when the same command may succeed later as it is (a
code worth a retry, or a job not done within the wait the command was given), so that a
script knows whether to retry, with `--json` or without. A job submitted without a wait exits
0. Usage and setting errors keep exit 2 (`workers.cli.common.EXIT_USAGE`)."""

from __future__ import annotations

from collections.abc import Mapping

from pipelines.outcomes import Outcome
from pipelines.results import Envelope, Status

EXIT_FAILED = 1
EXIT_LATER = 75

# The codes worth the same command again later: the provider, the broker, the disk, the
# queue's load, or a job that a new submission makes afresh.
_LATER = frozenset(
    {
        Outcome.TIMEOUT,
        Outcome.PROVIDER_UNAVAILABLE,
        Outcome.PROVIDER_BUSY,
        Outcome.UNAVAILABLE,
        Outcome.DISK_FULL,
        Outcome.VERSION_MISMATCH,
        Outcome.RETRIES_EXHAUSTED,
        Outcome.MALFORMED_JOB,
        Outcome.INPUT_MISSING,
        Outcome.BROKER_UNAVAILABLE,
        Outcome.BROKER_CANNOT_PERSIST,
        Outcome.NO_WORKER,
        Outcome.QUEUE_FULL,
        Outcome.QUEUE_BUSY,
    }
)
EXIT: Mapping[Outcome, int] = {
    code: EXIT_LATER if code in _LATER else EXIT_FAILED for code in Outcome
}


def exit_status(outcome: Outcome | None) -> int:
    """The exit of a command that reports `outcome` (none, or one unknown here: failed)."""
    return EXIT.get(outcome, EXIT_FAILED) if outcome is not None else EXIT_FAILED


def job_exit(envelope: Envelope | None, waited: bool) -> int:
    """The exit of a command whose output is one job's: 0 once it is done (or, submitted
    without a wait, still running), else by its outcome; not done within a wait: 75."""
    if envelope is None:
        return EXIT_LATER if waited else 0
    if envelope.status is Status.DONE:
        return 0
    return exit_status(envelope.outcome)


def failure_line(what: str, envelope: Envelope) -> str:
    """The stderr line of a job that ended without its output: its status, code, reason."""
    code = f" ({envelope.outcome.value})" if envelope.outcome is not None else ""
    return f"mcp-media: {what} {envelope.status.value}{code}: {envelope.reason}\n"
