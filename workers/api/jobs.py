"""One job for one request, as every route runs it: answered from a stored result when there
is one, else refused while the cluster cannot take it (429 over high water, 503 with no
worker), else submitted and waited for (504 with the job id when the wait runs out).

The client is synchronous (redis-py, Celery): its calls run in worker threads, and waiting
is an async poll, so a request that waits holds no thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio import to_thread

from pipelines.media import Capability
from pipelines.results import Envelope, ResultKey, Status
from workers.api.context import ApiContext
from workers.api.errors import ApiError
from workers.capabilities import CAPABILITIES
from workers.client import JobHandle, MediaClient
from workers.store import settled

POLL_FIRST = 0.005
POLL_MAX = 0.1
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


@dataclass(frozen=True, slots=True)
class Submitted:
    handle: JobHandle
    started: float
    cached: bool


def client_of(ctx: ApiContext) -> MediaClient:
    assert ctx.client is not None, "create_app gives the context its client"
    return ctx.client


async def stored(ctx: ApiContext, key: ResultKey) -> Envelope | None:
    """The finished result that answers `key` now, if any (a dedup hit)."""
    envelope = await to_thread.run_sync(client_of(ctx).store.get, key)
    return envelope if settled(envelope) else None


async def admit(ctx: ApiContext, capability: Capability) -> None:
    """Refuse work the cluster cannot take now: no worker (503), over high water (429)."""
    store = client_of(ctx).store
    queue = CAPABILITIES[capability].queue
    if not await to_thread.run_sync(store.serving, queue):
        raise ApiError(
            503,
            f"no worker serves the '{queue}' queue: start one with "
            f"`mcp-media worker --queues {queue}` (or `mcp-media up`)",
            code="no_worker",
        )
    waiting = (await to_thread.run_sync(store.queue_lengths, [queue]))[queue]
    high_water = ctx.settings.jobs.high_water
    if waiting >= high_water:
        raise ApiError(
            429,
            f"the '{queue}' queue holds {waiting} waiting jobs (high water {high_water}); "
            "retry later",
            code="queue_full",
            headers={"Retry-After": str(ctx.settings.api.retry_after)},
        )


async def submit(
    ctx: ApiContext,
    capability: Capability,
    sha256: str,
    path: Any,
    params: Mapping[str, Any] | None = None,
) -> Submitted:
    """The stored result (dedup hit) or a job on the queue, after `admit`."""
    client = client_of(ctx)
    key = client.key(capability, sha256, params)
    found = await stored(ctx, key)
    if found is not None:
        ctx.metrics.dedup_hits.labels(capability.value).inc()
        handle = JobHandle(found.job_id or "-", key, path, found.status, found)
        return Submitted(handle, time.monotonic(), cached=True)
    await admit(ctx, capability)

    def send() -> JobHandle:
        return client.submit_one(capability, sha256, path, params=params)

    handle = await to_thread.run_sync(send)
    return Submitted(handle, time.monotonic(), cached=False)


async def poll(ctx: ApiContext, key: ResultKey) -> Envelope | None:
    """The finished envelope of `key`, or None while it runs."""
    envelope = await to_thread.run_sync(client_of(ctx).store.get, key)
    if envelope is not None and envelope.status.finished:
        return envelope
    return None


async def wait(ctx: ApiContext, job: Submitted, timeout: float | None = None) -> Envelope:
    """The job's envelope; 504 naming the job when the wait runs out."""
    if job.handle.envelope is not None:
        return job.handle.envelope
    deadline = time.monotonic() + (timeout if timeout is not None else ctx.settings.api.wait)
    delay = POLL_FIRST
    while True:
        envelope = await poll(ctx, job.handle.key)
        if envelope is not None:
            observe(ctx, job, envelope)
            return envelope
        if time.monotonic() >= deadline:
            raise timed_out(job)
        await anyio.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


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
    if reason.startswith(_BAD_AUDIO):
        raise ApiError(415, f"unreadable audio: {reason}", param="file", code="unreadable_audio")
    if reason.startswith(("ConfigError", "EmptyTextError", "TextTooLongError")):
        raise ApiError(400, reason, code="invalid_request")
    raise ApiError(500, f"job {job_id} {envelope.status.value}: {reason}", code="job_failed")
