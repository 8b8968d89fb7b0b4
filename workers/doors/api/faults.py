"""Faults of the server, not of the request, in the OpenAI shape: a full disk anywhere in a
request is a 507 naming the folder, a broker that does not answer (or cannot persist) a 503
with a Retry-After. What the cause chain of an error says decides, so a cache error that
wraps `ENOSPC` is still a full disk."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from pipelines.errors import causes, disk_full
from workers.doors.api.errors import ApiError

__all__ = ["broker_unavailable", "disk_full", "insufficient_storage", "server_fault"]

# (code, message) when an exception says the broker cannot serve (the gateway's `fault`).
BrokerFault = Callable[[BaseException], tuple[str, str] | None]


def insufficient_storage(error: OSError, folder: Path) -> ApiError:
    """507 naming the cause and the folder (where the error names no file: `folder`)."""
    where = Path(str(error.filename)).parent if error.filename else folder
    cause = error.strerror or ("no space left" if error.errno == errno.ENOSPC else "quota")
    return ApiError(
        507,
        f"the server cannot store this request: {cause} under {where}; free space there and retry",
        code="insufficient_storage",
    )


def broker_unavailable(code: str, message: str, retry_after: int) -> ApiError:
    return ApiError(503, message, code=code, headers={"Retry-After": str(retry_after)})


def server_fault(
    exc: BaseException, folder: Path, broker: BrokerFault | None, retry_after: int
) -> ApiError | None:
    """The shaped answer to a fault of the server's disk or broker behind `exc`; None for
    anything else (an internal error)."""
    full = disk_full(exc)
    if full is not None:
        return insufficient_storage(full, folder)
    if broker is not None:
        for found in causes(exc):
            fault = broker(found)
            if fault is not None:
                return broker_unavailable(*fault, retry_after)
    return None
