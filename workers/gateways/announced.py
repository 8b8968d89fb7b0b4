"""What the live workers announce they run and serve, as a producer reads it: the processor
version each capability keys its jobs by, and the catalog every door lists and accepts from
(`workers.core.catalog`). Read from the workers' announcements every few seconds."""

from __future__ import annotations

import json
import time
from typing import Any

from pipelines.media import Capability
from workers.core.capabilities import CAPABILITIES
from workers.core.catalog import Catalog
from workers.core.cluster_view import ClusterView

ANNOUNCED_TTL = 5.0  # seconds a producer keys jobs by the versions it last read


class Announcements:
    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._announced: dict[Capability, tuple[float, dict[str, Any] | None]] = {}

    def announced(self, capability: Capability) -> dict[str, Any] | None:
        """What most live workers of the capability's queue announce they run (the newest
        started one breaks a tie, as in a rolling upgrade); looked up every few seconds."""
        now = time.monotonic()
        cached = self._announced.get(capability)
        if cached is not None and now - cached[0] < ANNOUNCED_TTL:
            return cached[1]
        queue = CAPABILITIES[capability].queue
        tally: dict[str, tuple[int, float, dict[str, Any]]] = {}
        for worker in self.view.serving(queue):
            found = worker.versions.get(capability.value)
            if found is None:
                continue
            text = json.dumps(found, sort_keys=True)
            count, newest, _ = tally.get(text, (0, 0.0, found))
            tally[text] = (count + 1, max(newest, worker.started_at or 0.0), found)
        chosen = max(tally.values(), key=lambda t: (t[0], t[1]))[2] if tally else None
        self._announced[capability] = (now, chosen)
        return chosen

    def catalog(self, voice: str) -> Catalog:
        """What the live workers of the tts and stt queues announce they serve (the same
        announcement that keys their jobs); `voice` while no tts worker names one."""
        return Catalog.announced(
            self.announced(Capability.AUDIO_SYNTHESIZE),
            self.announced(Capability.AUDIO_TRANSCRIBE),
            voice=voice,
        )
