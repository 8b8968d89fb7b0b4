"""One exception tree, split by what a worker should do with the failure."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

from pipelines.outcomes import Outcome

MAX_CHAIN = 16  # errors `causes` walks at most
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class MediaError(Exception):
    """Root of every error this project raises on purpose; `outcome` is its code (set by
    each class, or by an instance that knows better)."""

    outcome: Outcome = Outcome.INTERNAL


class TransientError(MediaError):
    """The same input may succeed later (network, broker, busy provider): retry."""

    outcome = Outcome.UNAVAILABLE


class PermanentError(MediaError):
    """The input or the configuration is wrong: fail the job, never retry."""

    outcome = Outcome.INVALID_INPUT


class Skipped(MediaError):
    """Nothing to do (already done, disabled capability)."""

    outcome = Outcome.SKIPPED


class Stopped(PermanentError):
    """The caller's `should_stop()` said to stop: the work ended part-way, with no result."""

    outcome = Outcome.CANCELLED


class ConfigError(PermanentError):
    """Settings or model files are unusable; raised at start-up, not per job."""

    outcome = Outcome.BAD_CONFIGURATION


class ModelMissing(ConfigError):
    """No model is prepared for the job's capability. Its message is what a user is told
    (what is missing, how to get it), never the folder looked in: that is logged where the
    job ran, and the folder lies on a server the agent cannot see."""

    outcome = Outcome.MODEL_MISSING


class Unsupported(PermanentError):
    """The workers cannot do what the job asks (a voice blend on an engine without blends)."""

    outcome = Outcome.UNSUPPORTED


class InvalidToolResult(PermanentError):
    """The input is not an MCP CallToolResult at all."""


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it (`raise ... from`, or raised while handling), and the
    members of an exception group: a bounded walk."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < MAX_CHAIN:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)


def disk_full(exc: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT error behind `exc`, if any."""
    for found in causes(exc):
        if isinstance(found, OSError) and found.errno in DISK_FULL:
            return found
    return None


def outcome_of(exc: BaseException) -> Outcome:
    """The code of a failure: a full disk anywhere in its chain (whoever wrapped it), else
    the code the error names itself, else `internal` (nothing we raised on purpose)."""
    if disk_full(exc) is not None:
        return Outcome.DISK_FULL
    return exc.outcome if isinstance(exc, MediaError) else Outcome.INTERNAL


def no_space(error: OSError, folder: Path | None = None) -> str:
    """A full disk in the OS's words, and where: `No space left on device under /x` (the
    folder of the file the error names, else `folder`)."""
    where = Path(str(error.filename)).parent if error.filename else folder
    cause = error.strerror or (
        "No space left on device" if error.errno == errno.ENOSPC else "Disk quota exceeded"
    )
    return f"{cause} under {where}" if where is not None else cause
