"""What every port's contract checks share: the harness an implementation hands them, and a
few keys and envelopes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.media import Capability
from pipelines.results import Envelope, ResultKey, Status
from workers.state.shared_state import SharedState

KEY = ResultKey(Capability.VISION_SUMMARIZE, "abc123", "a" * 64)
OTHER = ResultKey(Capability.AUDIO_TRANSCRIBE, "abc123", "b" * 64)


@dataclass(frozen=True)
class Harness:
    """One implementation of the shared state, as the checks drive it.

    `make` builds the state over sidecars under a folder (twice over one folder: a second
    process); `wait` lets time pass for expiries (the twin's clock, or real seconds);
    `announce` puts a worker's announcement where the roster reads it (a heartbeat's write);
    `enqueue` leaves jobs waiting in a queue (a sent message, or the twin's admitted job);
    `expire_entries` lets every result's index entry run out its TTL (the sidecars stay).
    """

    make: Callable[[Path], SharedState]
    wait: Callable[[float], None]
    announce: Callable[[SharedState, str, dict[str, Any]], None]
    enqueue: Callable[[SharedState, str, int], None]
    expire_entries: Callable[[SharedState], None]


Check = Callable[[Harness, Path], None]


def envelope(key: ResultKey = KEY, status: Status = Status.DONE, job_id: str = "j1") -> Envelope:
    return Envelope(status=status, key=key, output={"summary": "x"}, job_id=job_id)


def speech_key(capability: Capability, n: int) -> ResultKey:
    return ResultKey(capability, "abc123", f"{n:064x}")
