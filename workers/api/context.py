"""What every route of the API shares: the settings, the key, the queue client, the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workers.api.metrics import ApiMetrics
from workers.settings import Settings

if TYPE_CHECKING:
    from workers.client import MediaClient


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    key: str
    client: MediaClient | None = None  # the cluster's gateway (create_app hands it in)
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
