"""Asking a job to stop, and reading how far it got: two named reports (the coordination
port, `workers.state.coordination`).

A door that gave up on a job (an MCP `tasks/cancel`) asks it to stop; its worker looks
before it runs the stage and at every checkpoint the stage offers (each window of a
transcription, each piece of speech, every moment it waits for the vision provider), and
ends the job `failed` with the reason `cancelled`: the worker itself serves on. The same
checkpoint writes the job's progress for the door to show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol

from pipelines.errors import PermanentError
from pipelines.outcomes import Outcome
from workers.core import keys

log = logging.getLogger(__name__)

CANCEL_TTL = 24 * 3600  # a job runs within its hard time limit, far below this
PROGRESS_TTL = 3600
CANCELLED = "cancelled: the client cancelled the job"
# The job the current thread runs (set by `execute` around the stage).
running_job: ContextVar[str | None] = ContextVar("running_job", default=None)


class Reports(Protocol):
    """The part of `Coordination` these read and write."""

    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None: ...
    def report(self, name: str) -> dict[str, Any] | None: ...


class Cancelled(PermanentError):
    """The job was asked to stop; its stage ends here."""

    outcome = Outcome.CANCELLED


def request_cancel(reports: Reports, job_id: str) -> None:
    reports.put_report(keys.job_cancel(job_id), {"at": time.time()}, CANCEL_TTL)


def cancel_requested(reports: Reports, job_id: str | None) -> bool:
    return job_id is not None and reports.report(keys.job_cancel(job_id)) is not None


def progress(reports: Reports, job_id: str) -> dict[str, Any] | None:
    """What the job reported last ({"done_s": seconds of input done}), if anything."""
    return reports.report(keys.job_progress(job_id))


def stop_asked(reports: Reports) -> Callable[[], bool] | None:
    """For the stage of the job running in this thread: has the job been asked to stop? A
    plain callable for pipelines that look between pieces of work (sentences, the provider's
    answer) and raise `pipelines.errors.Stopped`. None outside a job."""
    job_id = running_job.get()
    if job_id is None:
        return None
    return lambda: cancel_requested(reports, job_id)


def checkpoint(reports: Reports) -> Callable[[float], None] | None:
    """For the stage of the job running in this thread: record `done_s`, and raise
    `Cancelled` once the job was asked to stop. None outside a job."""
    job_id = running_job.get()
    if job_id is None:
        return None

    def check(done_s: float) -> None:
        if cancel_requested(reports, job_id):
            raise Cancelled(CANCELLED)
        try:
            reports.put_report(
                keys.job_progress(job_id), {"done_s": round(done_s, 2)}, PROGRESS_TTL
            )
        except Exception:  # progress is for show: a broker refusing writes fails no job
            log.warning("progress of job %s not recorded", job_id, exc_info=True)

    return check
