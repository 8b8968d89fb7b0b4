"""Starting the stdio door: the upstreams first, then the first answers, then the rest of
the door.

An agent lists the tools right after it starts the door, and some give up within a second
or two. The stdio upstreams are started before the MCP SDK and the door are imported, and
the client's `initialize` and first `tools/list` are answered before the SDK is loaded
(`early_front`, unless MCP__EARLY_ANSWERS is off): the first answers wait for the upstreams'
own, not for the SDK. Nothing else is opened here: the job gateway opens once tools/list
is answered (`MediaRewriter.open_soon`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

import anyio

from workers.doors.mcp.stdio_pipes import open_wire
from workers.doors.mcp.upstream_process import Prestarted
from workers.doors.mcp.upstream_specs import UpstreamSpec

if TYPE_CHECKING:
    from workers.doors.mcp.early_front import Early
    from workers.doors.mcp.proxy import Proxy

log = logging.getLogger("mcp_media.proxy")


def _stop_on_signals_early(prestarted: Prestarted) -> None:
    """SIGTERM or SIGINT before the door handles signals itself (`serve.stop_on_signals`
    takes them over): the upstreams started here are stopped, then we exit. An agent that
    lists the tools and quits at once would otherwise leave them running: they are in
    process groups of their own, which the signal does not reach."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("%s while starting: stopping", signal.Signals(signum).name)
        prestarted.stop_now()
        sys.stderr.flush()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)


def serve_stdio_started(
    specs: Sequence[UpstreamSpec], build: Callable[[Prestarted], Proxy], early: Early | None = None
) -> int:
    """Start the stdio upstreams of `specs`, give the `early` answers, then `build` the door
    (importing it) and serve it over stdio until stdin closes or a signal comes."""

    async def run() -> None:
        prestarted = await Prestarted.start(specs)
        _stop_on_signals_early(prestarted)
        try:
            with open_wire() as wire:
                async with anyio.create_task_group() as front_tasks:  # its reads, handshakes
                    listed = False
                    if early is not None and wire.writer is not None:
                        from workers.doors.mcp.early_front import EarlyFront

                        front = EarlyFront(wire, wire.writer, specs, prestarted)
                        handover = await front.run(front_tasks, early)
                        wire, listed = front.wire_after(handover), handover.listed
                    proxy = build(prestarted)
                    from workers.doors.mcp.serve import serve_stdio_async

                    if listed:
                        proxy.rewriter.open_soon()  # as the proxy's own tools/list does
                    try:
                        await serve_stdio_async(proxy, wire)
                    finally:
                        proxy.rewriter.close()
                        front_tasks.cancel_scope.cancel()
        finally:
            await prestarted.close()

    anyio.run(run)
    return 0
