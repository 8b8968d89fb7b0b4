"""What every route of the API shares: the settings, the key, the queue client, the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.api.metrics import ApiMetrics
from workers.client import MediaClient
from workers.settings import Settings


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    key: str
    client: MediaClient | None = None  # None: built by create_app (tests of routes give one)
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
