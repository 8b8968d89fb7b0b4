"""One exception tree, split by what a worker should do with the failure."""

from __future__ import annotations

import errno
from collections.abc import Iterator

MAX_CHAIN = 16  # errors `causes` walks at most
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class MediaError(Exception):
    """Root of every error this project raises on purpose."""


class TransientError(MediaError):
    """The same input may succeed later (network, broker, busy provider): retry."""


class PermanentError(MediaError):
    """The input or the configuration is wrong: fail the job, never retry."""


class Skipped(MediaError):
    """Nothing to do (already done, disabled capability)."""


class Stopped(PermanentError):
    """The caller's `should_stop()` said to stop: the work ended part-way, with no result."""


class ConfigError(PermanentError):
    """Settings or model files are unusable; raised at start-up, not per job."""


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
