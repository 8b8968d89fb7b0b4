"""The in-process job gateway: jobs run in this process, no broker; sidecars give dedup.

The same contract as the cluster's `MediaClient`: a stored `done` result answers, a job in
flight for the key is joined, the high water refuses (`limit`), and a wait is matched to the
job it was handed. Jobs run in a small thread pool through the one `execute`, so a job not
done within a wait keeps running and writes its sidecar when it ends. The pool is this
process's own, with one lane: a batch submission (`lane`) runs in its turn like any other,
and the high water applies to both.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipelines.media import Capability, JobRequest
from pipelines.results import Envelope, ResultKey, Status
from workers.core import keys
from workers.core.capabilities import CAPABILITIES, Lane
from workers.core.catalog import Catalog
from workers.core.gateway import Admission, Chunk, JobGateway, JobHandle, QueueFull, answers
from workers.core.settings import Settings
from workers.files.blobs import BlobRef
from workers.jobs.execute import Job, execute
from workers.jobs.resources import Resources, local_resources
from workers.state.cancellation import progress as job_progress
from workers.state.cancellation import request_cancel

log = logging.getLogger(__name__)

INLINE_WORKERS = 2


class InlineGateway(JobGateway):
    """Runs jobs here; safe to call from several threads."""

    runs_here = True

    def __init__(
        self,
        settings: Settings,
        resources: Resources | None = None,
        workers: int = INLINE_WORKERS,
        run: Callable[[Resources, Job], Envelope] = execute,
    ) -> None:
        self.settings = settings
        self.resources = resources or local_resources(settings)
        self._workers = workers
        self._run = run
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._running: dict[ResultKey, tuple[str, concurrent.futures.Future[Envelope]]] = {}
        self._jobs: dict[str, ResultKey] = {}
        self._catalog: Catalog | None = None

    def key(
        self, capability: Capability, sha256: str, params: Mapping[str, Any] | None = None
    ) -> ResultKey:
        spec = CAPABILITIES[capability]
        return ResultKey(capability, self.resources.version(spec, params), sha256)

    def get(self, key: ResultKey) -> Envelope | None:
        return self.resources.state.results.get(key)

    def catalog(self) -> Catalog:
        """What this process serves: the announcement a worker of this node would make."""
        if self._catalog is None:
            self._catalog = own_catalog(self.settings)
        return self._catalog

    def serving(self, queue: str) -> int:
        return 1  # this process runs every queue's jobs itself

    def read_chunks(self, handle: JobHandle, after: str, block_ms: int) -> Sequence[Chunk]:
        return self.resources.state.chunks.read(keys.chunks(handle.key), after, block_ms)

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
        within: float | None = None,  # jobs run here, each in its caller's turn: no estimate
        lane: Lane = Lane.LIVE,  # one pool, one lane: jobs run in the order submitted
    ) -> JobHandle:
        key = self.key(capability, sha256, params)
        existing = self.get(key)
        if answers(existing, None, force):
            assert existing is not None
            return JobHandle.settled(key, path, existing)
        with self._lock:
            running = self._running.get(key)
            if running is not None:
                return JobHandle(
                    running[0], key, path, Status.PENDING, admission=Admission.JOINED, force=force
                )
            queue = CAPABILITIES[capability].queue
            high_water = self.settings.jobs.high_water
            if limit:
                admitted = sum(CAPABILITIES[k.capability].queue == queue for k in self._running)
                if admitted >= high_water:
                    raise QueueFull(queue, admitted, high_water)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self._workers, thread_name_prefix="mcp-media-job"
                )
            job_id = str(uuid.uuid4())
            job = Job(
                key,
                path,
                params=dict(params or {}),
                job_id=job_id,
                trace_id=trace_id,
                worker="inline",
            )
            future = self._pool.submit(self._run, self.resources, job)
            self._running[key] = (job_id, future)
            self._jobs[job_id] = key
        future.add_done_callback(lambda done: self._finished(key, job_id, done))
        return JobHandle(job_id, key, path, Status.PENDING, force=force)

    def _finished(
        self, key: ResultKey, job_id: str, future: concurrent.futures.Future[Envelope]
    ) -> None:
        with self._lock:
            if self._running.get(key, ("", None))[0] == job_id:
                del self._running[key]
        if not future.cancelled() and future.exception() is not None:
            log.error("inline job %s for %s failed", job_id, key, exc_info=future.exception())

    def _answer(self, handle: JobHandle) -> JobHandle:
        envelope = self.get(handle.key)
        if envelope is not None and handle.answered_by(envelope):
            return replace(handle, envelope=envelope, status=envelope.status)
        return handle

    def _future(self, handle: JobHandle) -> concurrent.futures.Future[Envelope] | None:
        with self._lock:
            running = self._running.get(handle.key)
        return running[1] if running is not None and running[0] == handle.id else None

    def wait(self, handles: list[JobHandle], timeout: float) -> list[JobHandle]:
        futures = [f for h in handles if h.envelope is None and (f := self._future(h))]
        if futures:
            concurrent.futures.wait(futures, timeout=max(timeout, 0))
        return [h if h.envelope is not None else self._answer(h) for h in handles]

    async def wait_async(self, handle: JobHandle, timeout: float) -> JobHandle:
        future = self._future(handle) if handle.envelope is None else None
        if future is not None:
            # however it ends (done, timed out, raised), the store says what happened
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        return handle if handle.envelope is not None else self._answer(handle)

    def result(self, ident: str) -> tuple[str | None, ResultKey | None, Envelope | None]:
        """A result by job id or by sha256 (this process's processor versions)."""
        with self._lock:
            key = self._jobs.get(ident)
        if key is not None:
            return ident, key, self.get(key)
        if len(ident) != 64 or any(c not in "0123456789abcdef" for c in ident):
            return None, None, None
        for capability in Capability:
            key = self.key(capability, ident)
            with self._lock:
                running = self._running.get(key)
            if running is not None:
                return running[0], key, None
            envelope = self.get(key)
            if envelope is not None:
                return envelope.job_id, key, envelope
        return None, None, None

    def cancel(self, job_id: str) -> None:
        request_cancel(self.resources.state.coordination, job_id)

    def progress(self, job_id: str) -> float | None:
        done = job_progress(self.resources.state.coordination, job_id)
        return float(done["done_s"]) if done is not None else None

    def waiting(self) -> dict[str, int]:
        """Jobs admitted and not finished, by queue."""
        with self._lock:
            keys = list(self._running)
        counts = dict.fromkeys((spec.queue for spec in CAPABILITIES.values()), 0)
        for key in keys:
            counts[CAPABILITIES[key.capability].queue] += 1
        return counts

    def close(self, finish_jobs: bool = False) -> None:
        """`finish_jobs` lets jobs running here end and write their results."""
        if self._pool is not None:
            self._pool.shutdown(wait=finish_jobs, cancel_futures=not finish_jobs)


def own_catalog(settings: Settings) -> Catalog:
    """What this process would serve: the announcements a worker of this node would make."""
    return Catalog.announced(
        _offer(settings, Capability.AUDIO_SYNTHESIZE),
        _offer(settings, Capability.AUDIO_TRANSCRIBE),
        voice=settings.tts.voice,
    )


def _offer(settings: Settings, capability: Capability) -> dict[str, Any] | None:
    try:
        return CAPABILITIES[capability].announce(settings)
    except Exception:  # no model prepared for it: nothing offered (its jobs say why)
        log.warning("nothing to offer for %s here", capability, exc_info=True)
        return None


def run_inline(
    settings: Settings,
    jobs: Iterable[JobRequest],
    trace_id: str,
    params: Mapping[str, Any] | None = None,
) -> list[JobHandle]:
    """The jobs of one command, run here to the end (`--inline`)."""
    gateway = InlineGateway(settings)
    try:
        return gateway.wait(
            gateway.submit(jobs, trace_id=trace_id, params=params), threading.TIMEOUT_MAX
        )
    finally:
        gateway.close(finish_jobs=True)
