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
from pipelines.results import Envelope, ResultKey, Status
from workers.core.capabilities import CAPABILITIES
from workers.core.gateway import Admission, JobHandle, QueueBusy, QueueFull, answers
from workers.core.wait_estimate import refuse_late, retry_after
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError

LATE_CHECK = 1.0  # seconds between re-estimates of a job still waiting in its queue

# Reasons of failed STT jobs that mean the upload is not usable audio (415, not 500).
_BAD_AUDIO = (
    "AudioDecodeError",
    "NotAudioError",
    "EmptyAudioError",
    "AudioLimitError",
    "AudioTooLongError",
    "AudioTooLargeError",
    "AudioDecodeTimeoutError",
)
# What a job's reason says when the worker's disk was full (ENOSPC, EDQUOT): a 507.
_DISK_FULL = ("No space left on device", "Disk quota exceeded", "[Errno 28]", "[Errno 122]")


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
        raise ApiError(
            503,
            f"no worker serves the '{queue}' queue: start one with "
            f"`mcp-media worker --queues {queue}` (or `mcp-media up`)",
            code="no_worker",
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
        raise ApiError(
            429,
            str(exc),
            code="rate_limit_exceeded",
            headers={"Retry-After": str(exc.retry_after)},
        ) from None
    except QueueFull as exc:
        raise ApiError(
            429,
            str(exc),
            code="queue_full",
            headers={"Retry-After": str(ctx.settings.api.retry_after)},
        ) from None
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
    raise ApiError(
        429,
        f"the job {job.handle.id} in the busy '{queue}' queue {why} this request's "
        f"{ctx.settings.api.wait:g} s wait; it stays queued: retry in {after} s and the retry "
        "is answered by it",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(after), "X-Job-Id": job.handle.id},
    )


def observe(ctx: ApiContext, job: Submitted, envelope: Envelope) -> None:
    capability = job.handle.key.capability.value
    ctx.metrics.job_seconds.labels(capability).observe(time.monotonic() - job.started)
    ctx.metrics.provider_calls.labels(capability, envelope.status.value).inc()


def timed_out(job: Submitted) -> ApiError:
    return ApiError(
        504,
        f"the job {job.handle.id} is still running; fetch its result later with "
        f"`mcp-media result {job.handle.id}`",
        code="job_timeout",
        headers={"X-Job-Id": job.handle.id},
    )


def check_done(envelope: Envelope, job_id: str) -> dict[str, Any]:
    """The output of a done job; a failed one in the error it deserves."""
    if envelope.status is Status.DONE:
        return dict(envelope.output)
    reason = envelope.reason or envelope.status.value
    if any(words in reason for words in _DISK_FULL):
        raise ApiError(
            507,
            f"job {job_id} could not store its output: {reason[:300]}; free space on the "
            "workers' disk and retry",
            code="insufficient_storage",
        )
    if reason.startswith(_BAD_AUDIO):
        raise ApiError(415, f"unreadable audio: {reason}", param="file", code="unreadable_audio")
    if reason.startswith(("ConfigError", "EmptyTextError", "TextTooLongError")):
        raise ApiError(400, reason, code="invalid_request")
    raise ApiError(500, f"job {job_id} {envelope.status.value}: {reason}", code="job_failed")
