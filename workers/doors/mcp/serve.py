"""Serving the MCP door: the proxy (with upstreams) or mcp-media's own tools alone, over stdio.

stdout carries nothing but the protocol; logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio

from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.doors.mcp.envelope import checked_stdio_server
from workers.doors.mcp.proxy import Proxy
from workers.doors.mcp.rewriter import DoorOptions, MediaRewriter
from workers.doors.mcp.stdio_pipes import Wire
from workers.doors.mcp.tools import OwnTools
from workers.doors.mcp.upstream import UpstreamSpec
from workers.doors.mcp.upstream_process import Prestarted

log = logging.getLogger("mcp_media.proxy")


def build_proxy(
    settings: Settings,
    specs: Sequence[UpstreamSpec],
    options: DoorOptions,
    gateway: JobGateway | Callable[[], JobGateway],
    allowed_roots: Sequence[Path] = (),
    prestarted: Prestarted | None = None,
    hidden_tools: frozenset[str] = frozenset(),
) -> Proxy:
    rewriter = MediaRewriter(settings, options, gateway)
    tools = OwnTools(rewriter, allowed_roots, hidden_tools)
    return Proxy(specs, rewriter, tools, settings.mcp, prestarted)


async def stop_on_signals(proxy: Proxy) -> None:
    """SIGTERM or SIGINT: the upstreams are stopped (their processes reaped), then we exit.
    Not by cancelling: the thread blocked reading stdin cannot be, and would hold the exit."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s: stopping", signal.Signals(signum).name)
            await proxy.close()
            proxy.rewriter.close()
            sys.stderr.flush()
            os._exit(128 + signum)


async def serve_stdio_async(proxy: Proxy, wire: Wire | None = None) -> None:
    """Until stdin closes or a signal comes; then every upstream is stopped (and its
    process reaped) before this returns. Signals are heard while the upstreams stop too."""
    async with anyio.create_task_group() as tasks:
        await proxy.run_upstreams(tasks)
        tasks.start_soon(stop_on_signals, proxy)
        try:
            async with checked_stdio_server(wire) as (read, write):
                await proxy.server.run(read, write, proxy.initialization_options())
        finally:
            await proxy.close()
            tasks.cancel_scope.cancel()


def serve_stdio(proxy: Proxy) -> int:
    try:
        anyio.run(serve_stdio_async, proxy)
    finally:
        proxy.rewriter.close()
    return 0
