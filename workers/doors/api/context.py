"""What every route of the API shares: the settings, the key, the job gateway, the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.core.speech_scoring import SpeechScoring
from workers.doors.api.errors import ApiError
from workers.doors.api.faults import server_fault
from workers.doors.api.metrics import ApiMetrics


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    key: str
    gateway: JobGateway  # every job goes through it: the cluster's, or this process's
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
    scoring: SpeechScoring | None = None  # the VAD model for server VAD; None: none prepared

    def fault(self, exc: BaseException) -> ApiError | None:
        """The shaped answer when `exc` is the server's fault: its disk full (507), its
        broker gone (503); None for anything else."""
        return server_fault(
            exc, self.settings.cache_root, self.gateway.fault, self.settings.api.retry_after
        )
