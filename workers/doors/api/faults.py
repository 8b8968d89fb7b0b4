"""Faults of the server, not of the request, in the OpenAI shape: a full disk anywhere in a
request is a 507 naming the folder, a broker that does not answer (or cannot persist) a 503
with a Retry-After. What the cause chain of an error says decides
(`workers.core.outcomes.server_failure`), so a cache error that wraps `ENOSPC` is still a
full disk; the answer is the code's, from `workers.doors.api.outcomes`."""

from __future__ import annotations

from pathlib import Path

from pipelines.errors import disk_full
from workers.core.outcomes import FaultOf, server_failure
from workers.doors.api.errors import ApiError
from workers.doors.api.outcomes import http_error

__all__ = ["disk_full", "insufficient_storage", "server_fault"]


def insufficient_storage(error: BaseException, folder: Path) -> ApiError:
    """507 naming the cause and the folder (where the error names no file: `folder`)."""
    found = server_failure(error, folder, None)
    assert found is not None, "called for a full disk"
    return http_error(found.outcome, found.message)


def server_fault(
    exc: BaseException, folder: Path, broker: FaultOf | None, retry_after: int
) -> ApiError | None:
    """The shaped answer to a fault of the server's disk or broker behind `exc`; None for
    anything else (an internal error)."""
    found = server_failure(exc, folder, broker)
    if found is None:
        return None
    return http_error(found.outcome, found.message, retry_after=retry_after)
