"""One tool result through the media pipeline for the MCP door: ingest, jobs, rewrite.

Jobs go through the job gateway: the cluster's with a broker (MCP_MEDIA_REDIS_URL, or this
home's embedded redis-server already running), else the in-process one (`--inline` too);
either way the caller waits at most `wait` seconds, and results not ready by then say how to
fetch them later.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

import anyio.to_thread

from pipelines import ingest
from pipelines.blocks import unwrap_result
from pipelines.fit_cache import FOLDER, FittedCopies
from pipelines.ingest import NeedsWork
from pipelines.media import JobRequest, MediaKind
from pipelines.render import RenderedResult, job_notes
from pipelines.rewrite import MediaPolicy, RewritePolicy, SentMediaTag, rewrite_result
from workers.core.gateway import JobGateway, JobHandle
from workers.core.settings import Settings
from workers.doors.mcp.clients import ClientName, tag_sent
from workers.doors.mcp.outcomes import ADVICE, door_failure, failure_line

log = logging.getLogger("mcp_media.door")

# How an agent fetches a result later: the media_result tool of this door.
MCP_FETCH = "the media_result tool (id {id})"


def failure_reason(exc: BaseException, gateway: JobGateway | None = None) -> str:
    """Why a result could not be processed, in one line: the server's fault behind it (a
    full disk; the broker gone or refusing writes, as `gateway` reads it), named by its code
    as the HTTP door names it, else the error's type and message."""
    return failure_line(door_failure(exc, gateway))


def own_line(text: str) -> str:
    """`text` on lines of its own: a client that joins text blocks with nothing between
    them (several agents do) never glues our tag to the upstream's last word."""
    return f"\n{text.strip(chr(10))}\n"


def own_lines(original: Any, rewritten: dict[str, Any]) -> dict[str, Any]:
    """`rewritten` with each text block the door added (not in the `original` content) on
    lines of its own."""
    theirs = original if isinstance(original, list) else []
    content = rewritten.get("content")
    if isinstance(content, list):
        rewritten["content"] = [
            {**block, "text": own_line(block["text"])}
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and block not in theirs
            else block
            for block in content
        ]
    return rewritten


@dataclass(frozen=True, slots=True)
class DoorOptions:
    policy: RewritePolicy = field(default_factory=RewritePolicy)
    wait: float = 20.0  # seconds a call waits for summaries and transcripts; 0: never
    inline: bool = False  # run jobs here even when a broker is reachable (see open_gateway)
    server: str | None = None  # the upstream's name, for read_resource hints
    sent_media_tag: SentMediaTag = SentMediaTag.AUTO  # see `policy_for`
    resolve_links: bool = False  # read upstreams' resource links (workers.doors.mcp.link_reads)

    def policy_for(self, client: ClientName | None) -> RewritePolicy:
        """The policy for `client`'s results: without our `MEDIA:` line under a block it
        receives as such when it writes its own (`clients.tag_sent`)."""
        tagged = tag_sent(self.sent_media_tag, client)
        if tagged == self.policy.tag_sent:
            return self.policy
        return replace(self.policy, tag_sent=tagged)


class MediaRewriter:
    """Rewrites tool results for one door process; safe to call from several threads."""

    def __init__(
        self,
        settings: Settings,
        options: DoorOptions,
        gateway: JobGateway | Callable[[], JobGateway],
    ) -> None:
        """`gateway`, or how to open it: a door opens it once its first answers are out
        (initialize and tools/list need none, and opening one imports the job machinery),
        on `open_soon` or at its first use."""
        self.settings = settings
        self.options = options
        self._gateway: JobGateway | Future[JobGateway]
        self._opener: Callable[[], JobGateway] | None = None
        if callable(gateway):
            self._gateway, self._opener = Future(), gateway
        else:
            self._gateway = gateway
        self._opening = threading.Lock()
        self._closed = False
        self.copies = FittedCopies(settings.cache_root / FOLDER)  # what `fit` made before

    def open_soon(self) -> None:
        """Start opening the gateway in a thread, if it is not open or opening already."""
        with self._opening:
            opener, self._opener = self._opener, None
        if opener is not None:
            threading.Thread(target=self._open, args=(opener,), daemon=True).start()

    def _open(self, opener: Callable[[], JobGateway]) -> None:
        assert isinstance(self._gateway, Future)
        try:
            self._gateway.set_result(opener())
        except BaseException as exc:  # handed to whoever uses the gateway
            self._gateway.set_exception(exc)

    @property
    def gateway(self) -> JobGateway:
        if isinstance(self._gateway, Future):
            self.open_soon()
            gateway = self._gateway.result()
            log.info("jobs run %s", "here" if gateway.runs_here else "on the queues")
            self._gateway = gateway
        return self._gateway

    async def _gateway_ready(self) -> JobGateway:
        """`gateway` for a caller on the event loop: waited for in a thread while it opens."""
        if isinstance(self._gateway, Future) and not self._gateway.done():
            self.open_soon()
            await anyio.to_thread.run_sync(self._gateway.exception)
        return self.gateway

    def close(self, finish_jobs: bool = False) -> None:
        """Disconnect; `finish_jobs` lets jobs running here end and write their results.
        A gateway never opened is not opened now (a client that only listed the tools
        leaves at once); one opening is waited for."""
        with self._opening:
            closed, self._closed = self._closed, True
            unopened, self._opener = self._opener is not None, None
        if closed:  # on a signal, then as the door returns
            return
        if unopened:
            assert isinstance(self._gateway, Future)
            self._gateway.set_exception(RuntimeError("the door is closed"))
            return
        self.gateway.close(finish_jobs=finish_jobs)

    def rewrite(
        self,
        result: Mapping[str, Any],
        server: str | None = None,
        client: ClientName | None = None,
        linked: frozenset[int] = frozenset(),
    ) -> dict[str, Any]:
        """The rewritten CallToolResult (wire JSON) for `client` (as its `initialize` named
        it); `linked`: the blocks it gets back as links (`pipelines.rewrite`). Raises
        InvalidToolResult for non-results."""
        rendered = ingest(
            result,
            cache=self.settings.media_cache(),
            server=server or self.options.server,
        )
        handles = self.run(rendered.jobs, self.options.wait)
        return self._rewritten(result, rendered, handles, client, linked)

    def _rewritten(
        self,
        result: Mapping[str, Any],
        rendered: RenderedResult,
        handles: list[JobHandle],
        client: ClientName | None = None,
        linked: frozenset[int] = frozenset(),
    ) -> dict[str, Any]:
        notes = job_notes(handles, MCP_FETCH, ADVICE)
        for blob in rendered.media:
            # Handed out again: fresh. Agents' gateways may pass on only recent files (e.g.
            # younger than 10 minutes) and the cache prunes the least recently used first.
            with suppress(OSError):
                os.utime(blob.path)
        policy = self.options.policy_for(client)
        rewritten = rewrite_result(result, rendered, notes, policy, self.copies, linked)
        return own_lines(unwrap_result(result).get("content"), rewritten)

    async def rewrite_async(
        self,
        result: Mapping[str, Any],
        server: str | None = None,
        client: ClientName | None = None,
        linked: frozenset[int] = frozenset(),
    ) -> dict[str, Any]:
        """`rewrite` for a caller on the event loop, handing a worker thread only what may
        block. A result whose media are all proved and cached already (the same screenshot
        again: a hash and a stat), with stored results found where jobs run here, is
        rewritten on the loop; a new blob (written, synced, decoded), a job to wait for, or
        a broker to ask goes to a thread. On a busy machine each hand-off waits for a core."""
        if not (await self._gateway_ready()).runs_here:  # asking a broker: a round trip
            return await anyio.to_thread.run_sync(self.rewrite, result, server, client, linked)
        try:
            rendered = ingest(
                result,
                cache=self.settings.media_cache(),
                server=server or self.options.server,
                known_only=True,
            )
        except NeedsWork:
            return await anyio.to_thread.run_sync(self.rewrite, result, server, client, linked)
        # Stored results are in memory (or one small sidecar file): found without a thread.
        handles = self.run(rendered.jobs, 0)
        wait = self.options.wait
        if wait > 0 and any(not handle.status.finished for handle in handles):
            handles = await anyio.to_thread.run_sync(self.gateway.wait, handles, wait)
        if self.options.policy.images is MediaPolicy.FIT and any(
            blob.kind is MediaKind.IMAGE for blob in rendered.media
        ):  # a copy to decode and encode, or to read and hash
            return await anyio.to_thread.run_sync(
                self._rewritten, result, rendered, handles, client, linked
            )
        return self._rewritten(result, rendered, handles, client, linked)

    def run(
        self, jobs: Sequence[JobRequest], wait: float, params: Mapping[str, Any] | None = None
    ) -> list[JobHandle]:
        """Submit the jobs (with the job options `params`) through the gateway; wait at most
        `wait` seconds (0: never)."""
        if not jobs:
            return []
        handles = self.gateway.submit(jobs, trace_id=uuid.uuid4().hex[:16], params=params)
        return self.gateway.wait(handles, wait) if wait > 0 else handles
