"""The cluster's operator ports (`workers.core.operations`): the page's and `/metrics`' view
of the cluster, and what the page steers, on the cluster gateway's store, Celery's remote
control and reprocess."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipelines.media import MediaKind
from pipelines.results import Envelope
from workers.broker.remote_control import ClusterControl
from workers.core import keys
from workers.core.announcements import WorkerInfo
from workers.core.operations import Selection
from workers.gateways.cluster import MediaClient
from workers.gateways.reprocess import run


class ClusterOperations:
    """Both operator ports of one cluster, on the gateway `client` the door also holds."""

    def __init__(self, client: MediaClient) -> None:
        self.client = client
        self.store = client.store
        self.control = ClusterControl(client.app)

    # the view

    def live_workers(self) -> list[WorkerInfo]:
        return self.store.live_workers()

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        return self.store.queue_lengths(queues)

    def paused_queues(self) -> set[str]:
        return self.store.paused_queues()

    def status_counts(self, capability: str) -> dict[str, int]:
        return self.store.status_counts(capability)

    def dead_letters(self, limit: int) -> list[dict[str, Any]]:
        return self.store.dead_letters(limit)

    def dead_letter_counts(self) -> dict[str, int]:
        return self.store.dead_letter_counts()

    def dead_letter_count(self) -> int:
        return self.store.dead_letter_count()

    def recent(self, limit: int) -> list[Envelope]:
        wanted = self.store.recent_keys(limit)
        found = self.store.get_many(wanted)
        return [found[key] for key in wanted if key in found]

    def reprocess_state(self, kind: MediaKind) -> dict[str, Any] | None:
        """The tally of the newest reprocess run of `kind`, and whether one still holds its lock."""
        report = self.store.report(keys.reprocess_progress(kind.value))
        if report is not None:
            report["locked"] = self.reprocessing(kind)
        return report

    def watch_all(self, callback: Callable[[Envelope], None]) -> Callable[[], None]:
        return self.client.events.watch_all(callback)

    # the steering

    def set_paused(self, queue: str, paused: bool) -> tuple[int, list[str]]:
        self.store.set_paused(queue, paused)
        names = [w.name for w in self.store.live_workers() if queue in w.queues]
        return self.control.consume(queue, not paused, names), names

    def resize(self, worker: WorkerInfo, delta: int) -> list[dict[str, Any]]:
        return self.control.resize(worker.name, worker.pool, delta)

    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None:
        return self.store.drop_dead_letter(job_id)

    def clear_dead_letters(self) -> int:
        return self.store.clear_dead_letters()

    def recorded_input(self, job_id: str) -> Path | None:
        return self.client.recorded_input(job_id)

    def reprocess(self, selection: Selection) -> None:
        with open(os.devnull, "w") as quiet:
            run(self.client, selection, out=quiet)

    def reprocessing(self, kind: MediaKind) -> bool:
        return self.store.locked(keys.reprocess_lock(kind.value))
