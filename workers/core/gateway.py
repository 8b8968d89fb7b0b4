"""The job gateway: the one way every door (CLI, MCP, HTTP, jobs page, reprocess) reaches jobs.

A door submits a request, joins or is answered by the work already done for its key, and
waits for the job it was handed, matched by job id. Two adapters keep one contract:
`workers.gateways.cluster.MediaClient` (the Celery/Redis cluster) and
`workers.gateways.inline.InlineGateway` (this process, no broker).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipelines.errors import MediaError
from pipelines.media import Capability, JobRequest
from pipelines.results import Envelope, ResultKey, Status
from workers.core.capabilities import Lane
from workers.core.catalog import Catalog
from workers.core.outcomes import Failure, Outcome
from workers.core.wait_estimate import retry_after

if TYPE_CHECKING:
    from workers.core.blob_ref import BlobRef
    from workers.core.settings import Settings


class Admission(StrEnum):
    """How a submission was answered (a handle's `admission`)."""

    SETTLED = "settled"  # a finished result answers it: nothing runs
    JOINED = "joined"  # the job already in flight for its key is its job
    QUEUED = "queued"  # a new job was enqueued


class QueueFull(MediaError):
    """Admission refused: the capability's queue is at its high water. Retry later."""

    outcome = Outcome.QUEUE_FULL

    def __init__(self, queue: str, waiting: int, high_water: int) -> None:
        super().__init__(
            f"the '{queue}' queue holds {waiting} waiting jobs (high water {high_water}); "
            "retry later"
        )
        self.queue = queue
        self.waiting = waiting
        self.high_water = high_water


class QueueBusy(MediaError):
    """Admission refused: a new job would finish past the caller's wait (`within`), by the
    work ahead of it in its queue. Retry after `retry_after` seconds."""

    outcome = Outcome.QUEUE_BUSY

    def __init__(self, queue: str, expected: float, within: float) -> None:
        self.queue = queue
        self.expected = expected
        self.within = within
        self.retry_after = retry_after(expected, within)
        super().__init__(
            f"the '{queue}' queue is busy: a new job would finish in about {expected:.0f} s, "
            f"past the {within:g} s this server waits; retry in {self.retry_after} s"
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a streaming job's output (`read_chunks`), or its end mark."""

    id: str
    data: bytes
    end: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class JobHandle:
    id: str
    key: ResultKey
    path: Path
    status: Status
    envelope: Envelope | None = None
    admission: Admission = Admission.QUEUED
    force: bool = False  # only this job's own run answers it, never an older result

    @classmethod
    def settled(cls, key: ResultKey, path: Path, envelope: Envelope) -> JobHandle:
        """The handle of a submission a stored result answers: nothing runs."""
        return cls(envelope.job_id or "-", key, path, envelope.status, envelope, Admission.SETTLED)

    def answered_by(self, envelope: Envelope | None) -> bool:
        """Does this envelope (if any) answer this job? See `answers`."""
        return answers(envelope, self.id, self.force)

    def to_json(self) -> dict[str, Any]:
        return {
            "capability": self.key.capability.value,
            "sha256": self.key.sha256,
            "id": self.id,
            "status": self.status.value,
            "result": self.envelope.to_json() if self.envelope is not None else None,
        }


def answers(envelope: Envelope | None, job_id: str | None, force: bool = False) -> bool:
    """The one rule that matches results to the jobs waiting for them.

    A job's own run answers it once finished. A `done` result of its key answers any job that
    is not forced (the same bytes give the same output). An older `degraded` or `failed`
    result never answers a new job: that new job is the retry.
    """
    if envelope is None or not envelope.status.finished:
        return False
    if job_id is not None and envelope.job_id == job_id:
        return True
    return not force and envelope.status is Status.DONE


class JobGateway(Protocol):
    """Submit, look up and wait for jobs, whatever runs them. The adapters subclass it."""

    settings: Settings
    runs_here: bool  # True: jobs run in this process (no broker)

    def key(
        self, capability: Capability, sha256: str, params: Mapping[str, Any] | None = None
    ) -> ResultKey: ...

    def submit_one(
        self,
        capability: Capability,
        sha256: str,
        path: Path,
        *,
        trace_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        force: bool = False,
        limit: bool = False,
        ref: BlobRef | None = None,
        within: float | None = None,
        lane: Lane = Lane.LIVE,
    ) -> JobHandle:
        """One admission for the key, the job waiting in `lane`: every door submits live
        (its caller waits), reprocess batch (workers take live work first)."""
        ...

    def submit(
        self,
        jobs: Iterable[JobRequest],
        *,
        trace_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        force: bool = False,
        lane: Lane = Lane.LIVE,
    ) -> list[JobHandle]:
        """`submit_one` for each job (the adapters inherit this)."""
        return [
            self.submit_one(
                job.capability,
                job.sha256,
                job.path,
                trace_id=trace_id,
                params=params,
                force=force,
                lane=lane,
            )
            for job in jobs
        ]

    def wait(self, handles: list[JobHandle], timeout: float) -> list[JobHandle]: ...

    async def wait_async(self, handle: JobHandle, timeout: float) -> JobHandle: ...

    def get(self, key: ResultKey) -> Envelope | None: ...

    def result(self, ident: str) -> tuple[str | None, ResultKey | None, Envelope | None]: ...

    def waiting(self) -> dict[str, int]: ...

    def catalog(self) -> Catalog:
        """What the serving workers offer (voices, models, languages, word timestamps), as
        they announce it; where jobs run in this process, what this process serves."""
        ...

    def serving(self, queue: str) -> int:
        """How many live workers serve `queue` (0: its jobs wait until one starts)."""
        ...

    def finish_estimate(self, handle: JobHandle) -> float | None:
        """Seconds until the handle's job, still waiting in its queue, should finish; None
        once it started, or where nothing estimates it."""
        return None

    def read_chunks(self, handle: JobHandle, after: str, block_ms: int) -> Sequence[Chunk]:
        """The chunks a streaming job handed over after `after`, waiting up to `block_ms`
        for one."""
        ...

    def unserved(self, handles: Iterable[JobHandle]) -> dict[str, list[JobHandle]]:
        """The unfinished handles whose queue no live worker serves, by queue: none where
        jobs run in this process."""
        return {}

    def cancel(self, job_id: str) -> None:
        """Ask the job to stop: it ends `failed` with the reason `cancelled` (before it runs,
        or at the stage's next checkpoint) unless it finishes first."""
        ...

    def progress(self, job_id: str) -> float | None:
        """Seconds of input the running job has done, when its stage reports it."""
        ...

    def close(self, finish_jobs: bool = False) -> None: ...

    def fault(self, exc: BaseException) -> Failure | None:
        """The failure `exc` names when it says the queue itself cannot serve (the cluster's
        broker gone or refusing writes); None for anything else, and always None where jobs
        run in this process."""
        return None
