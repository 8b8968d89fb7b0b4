"""Starting the stdio door: the upstreams first, then the rest of the door.

An agent lists the tools right after it starts the door, and some give up within a second
or two. The stdio upstreams are started before the MCP SDK and the door are imported (the
two take about as long as each other), so the first `tools/list` waits for the slower of the
two, not for both in turn. Nothing else is opened here: the job gateway opens once tools/list
is answered (`MediaRewriter.open_soon`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from workers.doors.mcp.upstream_process import Prestarted
from workers.doors.mcp.upstream_specs import UpstreamSpec

if TYPE_CHECKING:
    from workers.doors.mcp.proxy import Proxy


def serve_stdio_started(specs: Sequence[UpstreamSpec], build: Callable[[Prestarted], Proxy]) -> int:
    """Start the stdio upstreams of `specs`, then `build` the door (importing it) and serve
    it over stdio until stdin closes or a signal comes."""

    async def run() -> None:
        prestarted = await Prestarted.start(specs)
        try:
            proxy = build(prestarted)
        except BaseException:
            await prestarted.close()
            raise
        from workers.doors.mcp.serve import serve_stdio_async

        try:
            await serve_stdio_async(proxy)
        finally:
            proxy.rewriter.close()

    anyio.run(run)
    return 0
