"""A job's output as its worker hands it over (`workers.state.chunks`), relayed to one request:
the first chunk before the response starts (so a job that fails first still gets its proper
error status), then the rest as it comes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from anyio import to_thread

from pipelines.results import Envelope
from workers.core.gateway import Chunk
from workers.doors.api import jobs
from workers.doors.api.context import ApiContext

READ_BLOCK_MS = 500
RESULT_AFTER_END = 5.0  # seconds a finished stream waits for its job's stored result


class Relay:
    """The chunks of one streamed job, read from its Redis stream as the worker adds them."""

    def __init__(self, ctx: ApiContext, job: jobs.Submitted) -> None:
        self.ctx = ctx
        self.job = job
        self.after = "0"
        self.ended = False
        self.error = ""
        self.finished: Envelope | None = None  # the result, once `rest` has seen it

    async def read(self) -> Sequence[Chunk]:
        found = await to_thread.run_sync(
            self.ctx.gateway.read_chunks, self.job.handle, self.after, READ_BLOCK_MS
        )
        if found:
            self.after = found[-1].id
        return found

    async def first(self) -> tuple[list[bytes], Envelope | None]:
        """Wait for the first audio (or the result, or the end of the wait: 504 while the job
        runs, 429 as soon as a job still queued cannot start in time: `jobs.refused_late`)."""
        deadline = time.monotonic() + self.ctx.settings.api.wait
        checked = time.monotonic()
        while True:
            data = self._take(await self.read())
            if data:
                return data, None
            if self.ended:  # failed (or ended) before any audio: answer as its result says
                return [], await jobs.wait(self.ctx, self.job)
            envelope = await jobs.poll(self.ctx, self.job)
            if envelope is not None:
                jobs.observe(self.ctx, self.job, envelope)
                return [], envelope
            now = time.monotonic()
            if now >= checked + jobs.LATE_CHECK or now >= deadline:
                checked = now
                await jobs.refused_late(self.ctx, self.job, deadline - now)
            if now >= deadline:
                raise jobs.timed_out(self.job)

    def _take(self, chunks: Sequence[Chunk]) -> list[bytes]:
        data = []
        for chunk in chunks:
            if chunk.end:
                self.ended = True
                self.error = chunk.error
                break
            data.append(chunk.data)
        return data

    async def rest(self, first: list[bytes]) -> AsyncIterator[bytes]:
        for piece in first:
            yield piece
        deadline = time.monotonic() + self.ctx.settings.api.wait
        while not self.ended and time.monotonic() < deadline:
            chunks = await self.read()
            pieces = self._take(chunks)
            if self.error:
                return  # the response has started: the client sees it cut short
            for piece in pieces:
                yield piece
            if not chunks and await jobs.poll(self.ctx, self.job) is not None:
                # finished without an end mark (the stream expired): nothing more comes
                return
        # The worker stores the result just after the end mark: wait for it (briefly) so
        # that every streamed job is counted in /metrics like any other.
        waited = await self.ctx.gateway.wait_async(self.job.handle, RESULT_AFTER_END)
        self.finished = waited.envelope
        if self.finished is not None:
            jobs.observe(self.ctx, self.job, self.finished)
