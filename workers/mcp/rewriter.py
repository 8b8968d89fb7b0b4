"""One tool result through the media pipeline for the MCP door: ingest, jobs, rewrite.

With a broker (MCP_MEDIA_REDIS_URL, or this home's embedded redis-server already running)
jobs go to the queues through the client and dedup across the cluster. Without one they run
here, in a small thread pool, through the same job path (`--inline`); either way the caller
waits at most `wait` seconds, and results not ready by then say how to fetch them later.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines import ingest
from pipelines.media import JobRequest
from pipelines.render import job_notes
from pipelines.results import ResultKey, Status
from pipelines.rewrite import RewritePolicy, rewrite_result
from workers.broker import running_embedded
from workers.capabilities import CAPABILITIES
from workers.client import JobHandle, MediaClient
from workers.settings import Settings
from workers.store import settled

if TYPE_CHECKING:
    from workers.jobs.resources import Resources

log = logging.getLogger("mcp_media.door")

# How an agent fetches a result later: the media_result tool of this door.
MCP_FETCH = "the media_result tool (id {id})"
INLINE_WORKERS = 2


def failure_reason(exc: BaseException) -> str:
    """Why a result could not be processed, in one line: the error's type and message."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclass(frozen=True, slots=True)
class DoorOptions:
    policy: RewritePolicy = field(default_factory=RewritePolicy)
    wait: float = 20.0  # seconds a call waits for summaries and transcripts; 0: never
    inline: bool = False  # run jobs here even when a broker is reachable
    server: str | None = None  # the upstream's name, for read_resource hints


class MediaRewriter:
    """Rewrites tool results for one door process; safe to call from several threads."""

    def __init__(self, settings: Settings, options: DoorOptions) -> None:
        self.settings = settings
        self.options = options
        self._lock = threading.Lock()
        self.client: MediaClient | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._inline: Resources | None = None
        self._running: dict[ResultKey, concurrent.futures.Future[list[JobHandle]]] = {}
        if not options.inline:
            running = running_embedded(settings.home)
            url = settings.redis_url or (running.url if running is not None else None)
            if url is not None:
                self.client = MediaClient.connect(settings.model_copy(update={"redis_url": url}))
        log.info("jobs run %s", "on the queues" if self.client else "in this process")

    @property
    def queued(self) -> bool:
        return self.client is not None

    def close(self, finish_jobs: bool = False) -> None:
        """Disconnect; `finish_jobs` lets jobs running here end and write their results."""
        if self.client is not None:
            self.client.close()
        if self._pool is not None:
            self._pool.shutdown(wait=finish_jobs, cancel_futures=not finish_jobs)

    def rewrite(self, result: Mapping[str, Any], server: str | None = None) -> dict[str, Any]:
        """The rewritten CallToolResult (wire JSON); raises InvalidToolResult for non-results."""
        rendered = ingest(
            result,
            cache=self.settings.media_cache(),
            server=server or self.options.server,
        )
        handles = self.run(rendered.jobs, self.options.wait)
        return rewrite_result(result, rendered, job_notes(handles, MCP_FETCH), self.options.policy)

    def run(self, jobs: Sequence[JobRequest], wait: float) -> list[JobHandle]:
        if not jobs:
            return []
        trace_id = uuid.uuid4().hex[:16]
        if self.client is not None:
            handles = self.client.submit(jobs, trace_id=trace_id)
            return self.client.wait(handles, wait) if wait > 0 else handles
        return self._run_here(jobs, wait, trace_id)

    def _run_here(self, jobs: Sequence[JobRequest], wait: float, trace_id: str) -> list[JobHandle]:
        """Jobs in this process: a finished result answers at once, a job already running
        here is not started twice, and what is not done within `wait` keeps running."""
        from workers.jobs.inline import local_resources, run_inline

        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    INLINE_WORKERS, thread_name_prefix="mcp-media-job"
                )
                self._inline = local_resources(self.settings)
        assert self._inline is not None
        waiting: list[tuple[JobRequest, ResultKey, concurrent.futures.Future[list[JobHandle]]]]
        waiting = []
        done: dict[int, JobHandle] = {}
        for index, job in enumerate(jobs):
            spec = CAPABILITIES[job.capability]
            key = ResultKey(job.capability, spec.version(self.settings), job.sha256)
            found = self._inline.store.get(key)
            if settled(found):
                assert found is not None
                done[index] = JobHandle(job.sha256, key, job.path, found.status, found)
                continue
            with self._lock:
                future = self._running.get(key)
                if future is None:
                    future = self._pool.submit(
                        run_inline, self.settings, [job], trace_id, self._inline
                    )
                    self._running[key] = future
                    future.add_done_callback(functools.partial(self._finished, key))
            waiting.append((job, key, future))
        concurrent.futures.wait([f for _, _, f in waiting], timeout=max(wait, 0))
        for job, key, future in waiting:
            index = jobs.index(job)
            if future.done() and future.exception() is None:
                (done[index],) = future.result()
                continue
            if future.done():
                log.error("inline job %s failed", job.sha256, exc_info=future.exception())
            # Still running here: its sidecar is written when it ends; its id is the sha256.
            done[index] = JobHandle(job.sha256, key, job.path, Status.PENDING)
        return [done[i] for i in range(len(jobs))]

    def _finished(self, key: ResultKey, _future: object) -> None:
        with self._lock:
            self._running.pop(key, None)

    def running_here(self, sha256: str) -> ResultKey | None:
        """The key of a job running in this process for this media, if any."""
        with self._lock:
            return next((k for k in self._running if k.sha256 == sha256), None)
