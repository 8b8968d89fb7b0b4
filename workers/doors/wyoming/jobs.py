"""One job for one Wyoming request, through the job gateway as every door runs it: a stored
result answers at once (dedup), no live worker or a queue at its high water (or too busy to
finish within the wait) is refused, else the job is submitted to the live lane and waited
for; a streaming job's output is relayed chunk by chunk as its worker hands it over."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from anyio import to_thread

from pipelines.media import Capability
from pipelines.outcomes import Outcome
from pipelines.results import Envelope, Status
from workers.core.capabilities import CAPABILITIES
from workers.core.gateway import JobGateway, JobHandle, QueueBusy, QueueFull, answers
from workers.doors.wyoming.outcomes import Refused, job_failure

READ_BLOCK_MS = 500
RESULT_AFTER_END = 5.0  # seconds a finished stream waits for its job's stored result


async def submit(
    gateway: JobGateway,
    capability: Capability,
    sha256: str,
    path: Path,
    params: Mapping[str, Any] | None,
    wait: float,
) -> JobHandle:
    """The stored result's handle (a dedup hit), the job in flight, or a new one."""
    key = await to_thread.run_sync(gateway.key, capability, sha256, params)
    found = await to_thread.run_sync(gateway.get, key)
    if not answers(found, None):
        queue = CAPABILITIES[capability].queue
        if not await to_thread.run_sync(gateway.serving, queue):
            raise Refused(Outcome.NO_WORKER, f"no worker serves the '{queue}' queue")

    def send() -> JobHandle:
        return gateway.submit_one(capability, sha256, path, params=params, limit=True, within=wait)

    try:
        return await to_thread.run_sync(send)
    except (QueueBusy, QueueFull) as exc:
        raise Refused(exc.outcome, str(exc)) from None


async def finished(gateway: JobGateway, handle: JobHandle, wait: float) -> Envelope:
    """The job's envelope; a `timeout` refusal naming the job when the wait runs out."""
    if handle.envelope is not None:
        return handle.envelope
    waited = await gateway.wait_async(handle, wait)
    if waited.envelope is None:
        raise Refused(
            Outcome.TIMEOUT, f"the job {handle.id} did not finish within {wait:g} s; it goes on"
        )
    return waited.envelope


def output(envelope: Envelope, job_id: str) -> dict[str, Any]:
    """The output of a done job; a failed one refused as its code says."""
    if envelope.status is Status.DONE:
        return dict(envelope.output)
    raise job_failure(envelope, job_id)


async def relay(gateway: JobGateway, handle: JobHandle, wait: float) -> AsyncIterator[bytes]:
    """A streaming job's output as its worker hands it over; a job that streams nothing (a
    stored or joined one) ends the iteration at once: read its result then."""
    after = "0"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        chunks = await to_thread.run_sync(gateway.read_chunks, handle, after, READ_BLOCK_MS)
        for chunk in chunks:
            after = chunk.id
            if chunk.end:
                if chunk.error:
                    envelope = await finished(gateway, handle, RESULT_AFTER_END)
                    output(envelope, handle.id)  # the failure it names
                    raise Refused(Outcome.ENGINE_FAILED, chunk.error)
                return
            yield chunk.data
        if not chunks:
            found = await to_thread.run_sync(gateway.get, handle.key)
            if handle.answered_by(found):
                return  # finished without (or before) streaming: its file answers
    raise Refused(Outcome.TIMEOUT, f"the job {handle.id} did not finish within {wait:g} s")
