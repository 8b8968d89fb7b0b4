"""One job for one request, as every route runs it, through the job gateway: answered from a
stored result when there is one, refused while the cluster cannot take it (503 with no
worker, 429 when admission finds the queue at its high water, or the new job expected to
finish past MCP_MEDIA_API__WAIT by the work ahead of it), else submitted and waited for
(504 with the job id when the wait runs out while the job runs). While the job still waits in
its queue, its finish is re-estimated every `LATE_CHECK` seconds and the caller told to retry
(429 with Retry-After) as soon as it cannot finish within the wait (`workers.core.wait_estimate`):
the job stays queued, and the retry joins it.

Waiting follows the events channel and holds no thread; the gateway's other calls (redis-py,
Celery) run in worker threads.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anyio import to_thread

from pipelines.media import Capability
from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultKey, Status
from workers.core.capabilities import CAPABILITIES
from workers.core.gateway import Admission, JobHandle, QueueBusy, QueueFull, answers
from workers.core.wait_estimate import refuse_late, retry_after
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.outcomes import http_error, job_error

LATE_CHECK = 1.0  # seconds between re-estimates of a job still waiting in its queue


@dataclass(frozen=True, slots=True)
class Submitted:
    handle: JobHandle
    started: float
    cached: bool


async def stored(ctx: ApiContext, key: ResultKey) -> Envelope | None:
    """The finished result that answers `key` now, if any (a dedup hit)."""
    envelope = await to_thread.run_sync(ctx.gateway.get, key)
    return envelope if answers(envelope, None) else None


async def served(ctx: ApiContext, capability: Capability) -> None:
    """503 while no live worker serves the capability's queue."""
    queue = CAPABILITIES[capability].queue
    if not await to_thread.run_sync(ctx.gateway.serving, queue):
        raise http_error(
            Outcome.NO_WORKER,
            f"no worker serves the '{queue}' queue: start one with "
            f"`mcp-media worker --queues {queue}` (or `mcp-media up`)",
        )


async def submit(
    ctx: ApiContext,
    capability: Capability,
    sha256: str,
    path: Any,
    params: Mapping[str, Any] | None = None,
) -> Submitted:
    """The stored result (dedup hit), the job in flight, or a new one: one admission."""
    gateway = ctx.gateway
    key = await to_thread.run_sync(gateway.key, capability, sha256, params)
    found = await stored(ctx, key)
    if found is None:
        await served(ctx, capability)

    def send() -> JobHandle:
        return gateway.submit_one(
            capability, sha256, path, params=params, limit=True, within=ctx.settings.api.wait
        )

    try:
        handle = await to_thread.run_sync(send)
    except QueueBusy as exc:
        raise http_error(exc.outcome, str(exc), retry_after=exc.retry_after) from None
    except QueueFull as exc:
        raise http_error(exc.outcome, str(exc), retry_after=ctx.settings.api.retry_after) from None
    cached = handle.admission is Admission.SETTLED
    if cached:
        ctx.metrics.dedup_hits.labels(capability.value).inc()
    return Submitted(handle, time.monotonic(), cached=cached)


async def poll(ctx: ApiContext, job: Submitted) -> Envelope | None:
    """The envelope that answers the job, or None while it runs."""
    envelope = await to_thread.run_sync(ctx.gateway.get, job.handle.key)
    return envelope if job.handle.answered_by(envelope) else None


async def wait(ctx: ApiContext, job: Submitted, timeout: float | None = None) -> Envelope:
    """The job's envelope; 504 naming the job when the wait runs out."""
    if job.handle.envelope is not None:
        return job.handle.envelope
    limit = timeout if timeout is not None else ctx.settings.api.wait
    deadline = time.monotonic() + limit
    while True:
        step = min(LATE_CHECK, max(0.0, deadline - time.monotonic()))
        waited = await ctx.gateway.wait_async(job.handle, step)
        if waited.envelope is not None:
            observe(ctx, job, waited.envelope)
            return waited.envelope
        await refused_late(ctx, job, deadline - time.monotonic())
        if time.monotonic() >= deadline:
            raise timed_out(job)


async def refused_late(ctx: ApiContext, job: Submitted, left: float) -> None:
    """429 with Retry-After when the job, still waiting in its queue, is expected to finish
    past the `left` seconds of this request's wait (or that wait is over). Its retry joins
    the same job, whose result it then gets."""
    expected = await to_thread.run_sync(ctx.gateway.finish_estimate, job.handle)
    if not refuse_late(expected, left):
        return
    assert expected is not None
    after = retry_after(expected, ctx.settings.api.wait)
    queue = CAPABILITIES[job.handle.key.capability].queue
    why = (
        f"should finish in about {expected:.0f} s, past what is left of"
        if expected > left
        else "still waits at the end of"
    )
    raise http_error(
        Outcome.QUEUE_BUSY,
        f"the job {job.handle.id} in the busy '{queue}' queue {why} this request's "
        f"{ctx.settings.api.wait:g} s wait; it stays queued: retry in {after} s and the retry "
        "is answered by it",
        {"X-Job-Id": job.handle.id},
        retry_after=after,
    )


def observe(ctx: ApiContext, job: Submitted, envelope: Envelope) -> None:
    capability = job.handle.key.capability.value
    ctx.metrics.job_seconds.labels(capability).observe(time.monotonic() - job.started)
    ctx.metrics.provider_calls.labels(capability, envelope.status.value).inc()


def timed_out(job: Submitted) -> ApiError:
    return http_error(
        Outcome.TIMEOUT,
        f"the job {job.handle.id} is still running; fetch its result later with "
        f"`mcp-media result {job.handle.id}`",
        {"X-Job-Id": job.handle.id},
    )


def check_done(envelope: Envelope, job_id: str) -> dict[str, Any]:
    """The output of a done job; a failed one in the error its code deserves."""
    if envelope.status is Status.DONE:
        return dict(envelope.output)
    raise job_error(envelope, job_id)
