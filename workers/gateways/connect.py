"""Which job gateway a door holds: the cluster's when a broker is known, else this process's."""

from __future__ import annotations

from workers.core.gateway import JobGateway
from workers.core.settings import Settings


def open_gateway(settings: Settings, *, inline: bool = False, url: str | None = None) -> JobGateway:
    """The cluster's gateway when a broker is known (`url`, MCP_MEDIA_REDIS_URL, or this
    home's embedded redis-server already running), else the in-process one; `inline` forces
    the in-process one. A door answers a waiting client: its broker calls are bounded (a
    broker that is gone fails the call within the broker timeouts, not after ~35 s of
    retries)."""
    if not inline:
        from workers.broker.embedded import running_embedded

        running = running_embedded(settings.home)
        url = url or settings.redis_url or (running.url if running is not None else None)
        if url is not None:
            from workers.broker.target import RedisTarget
            from workers.gateways.cluster import MediaClient

            settings = settings.model_copy(update={"redis_url": url})
            # A Redis that refuses our certificate checks or credentials: one line now.
            RedisTarget.of(settings, url).check()
            return MediaClient.connect(settings, url, bounded=True)
    from workers.gateways.inline import InlineGateway

    return InlineGateway(settings)
