"""The cluster's side of what the jobs page steers (`workers.core.operations.ClusterSteering`):
pauses and dead letters in the shared state, pool sizes through Celery's remote control,
reprocess runs, and the stream of stored results."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.results import Envelope
from workers.broker.remote_control import ClusterControl
from workers.core.announcements import WorkerInfo
from workers.core.capabilities import lane_queues
from workers.core.operations import Selection
from workers.gateways.cluster import MediaClient
from workers.gateways.reprocess import run


class ClusterOperations:
    """The steering port of one cluster, on the gateway `client` the door also holds."""

    def __init__(self, client: MediaClient) -> None:
        self.client = client
        self.state = client.state
        self.control = ClusterControl(client.app)

    def set_paused(self, queue: str, paused: bool) -> tuple[int, list[str]]:
        """Pause (or resume) both lanes of `queue`; how many live workers confirmed."""
        self.state.coordination.set_paused(queue, paused)
        names = [w.name for w in self.state.view.serving(queue)]
        told = [self.control.consume(lane, not paused, names) for lane in lane_queues([queue])]
        return min(told), names

    def resize(self, worker: WorkerInfo, delta: int) -> list[dict[str, Any]]:
        return self.control.resize(worker.name, worker.pool, delta)

    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None:
        return self.state.dead_letters.drop(job_id)

    def clear_dead_letters(self) -> int:
        return self.state.dead_letters.clear()

    def recorded_input(self, job_id: str) -> Path | None:
        return self.client.recorded_input(job_id)

    def reprocess(self, selection: Selection) -> None:
        with open(os.devnull, "w") as quiet:
            run(self.client, selection, out=quiet)

    def watch_all(self, callback: Callable[[Envelope], None]) -> Callable[[], None]:
        return self.client.events.watch_all(callback)
