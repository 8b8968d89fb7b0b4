"""Outcome codes on the cluster side: the one code set (`pipelines.outcomes.Outcome`), and
the failures a door meets itself, outside any job (its disk full, the broker gone), named by
the same codes so that each door answers them through the one table it answers jobs with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipelines.errors import causes, disk_full, no_space
from pipelines.outcomes import Outcome

__all__ = ["Failure", "FaultOf", "Outcome", "server_failure"]


@dataclass(frozen=True, slots=True)
class Failure:
    """A code and what to tell the caller about it (text for people, same in every door)."""

    outcome: Outcome
    message: str


# The gateway's reading of an error: the failure it names (the broker), or None.
FaultOf = Callable[[BaseException], Failure | None]


def server_failure(
    exc: BaseException, folder: Path | None, fault: FaultOf | None
) -> Failure | None:
    """The server's own fault behind `exc`, wherever in its chain: a full disk (named with
    the folder of the file it could not write, else `folder`), or what `fault` (the
    gateway's) names; None for anything else (a bug is not an outage)."""
    full = disk_full(exc)
    if full is not None:
        return Failure(
            Outcome.DISK_FULL, f"the server cannot store this request: {no_space(full, folder)}"
        )
    if fault is not None:
        for found in causes(exc):
            named = fault(found)
            if named is not None:
                return named
    return None
