"""The Python client of a mcp-media cluster, for agent platforms: submit media jobs, wait for
them, read their results (`MediaClient.connect()`; see `workers.gateways.cluster`)."""

from workers.core.gateway import JobHandle
from workers.gateways.cluster import MediaClient

__all__ = ["JobHandle", "MediaClient"]
