"""What every route of the API shares: the settings, the key, the queue client, the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workers.core.settings import Settings
from workers.doors.api.errors import ApiError
from workers.doors.api.faults import server_fault
from workers.doors.api.metrics import ApiMetrics

if TYPE_CHECKING:
    from workers.gateways.cluster import MediaClient


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    key: str
    client: MediaClient | None = None  # the cluster's gateway (create_app hands it in)
    metrics: ApiMetrics = field(default_factory=ApiMetrics)

    def fault(self, exc: BaseException) -> ApiError | None:
        """The shaped answer when `exc` is the server's fault: its disk full (507), its
        broker gone (503); None for anything else."""
        broker = self.client.fault if self.client is not None else None
        return server_fault(exc, self.settings.cache_root, broker, self.settings.api.retry_after)
