"""The queues on `/metrics`, per capability and lane: what an autoscaler reads to add or
remove workers, and what a person reads to know when to add a node.

Every figure is read from Redis at scrape time in one round trip (`ClusterView.queue_signals`,
bounded work however long the backlog) plus the workers' announcements, so every `serve`
process reports the same cluster: aggregate these series with `max`, never `sum`, across
`serve` replicas. docs/guides/scaling.md says how to read them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from workers.core.capabilities import Lane, lane_of, lane_queues
from workers.core.wait_estimate import expected_finish

if TYPE_CHECKING:
    from workers.core.announcements import WorkerInfo
    from workers.core.capabilities import CapabilitySpec
    from workers.core.cluster_view import ClusterView, QueueSignals

LABELS = ["capability", "lane", "queue"]


@dataclass(frozen=True, slots=True)
class LaneQueue:
    """One lane of a capability and the Celery queue its jobs wait in."""

    spec: CapabilitySpec
    lane: Lane
    queue: str

    @property
    def labels(self) -> list[str]:
        return [self.spec.capability.value, self.lane.value, self.queue]


def every_lane() -> list[LaneQueue]:
    """Every lane of every capability: live (the capability's queue, what doors submit) and
    batch (`<queue>.batch`, reprocess)."""
    return [LaneQueue(*lane_of(queue), queue) for queue in lane_queues()]


def consuming(worker: WorkerInfo, lane: LaneQueue) -> bool:
    """Does this live worker take the lane's jobs? A worker of a capability serves both of
    its lanes, whichever of the two queue names it announces; a paused one takes none."""
    names = {lane.spec.queue, lane.queue}
    return bool(names & set(worker.queues)) and not names & set(worker.paused)


class QueueCollector(Collector):
    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def describe(self) -> Iterator[Metric]:
        """Nothing to check at registration (the broker may be down: a scrape answers)."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        lanes = every_lane()
        signals = self.view.queue_signals([lane.queue for lane in lanes])
        live = self.view.live_workers()
        paused = self.view.paused_queues()
        figures = _Figures(lanes, signals, live, paused)
        yield from figures.families()
        yield from figures.kept()


# name (after `mcp_media_queue_`), help text; each a gauge labelled capability, lane, queue.
FAMILIES = (
    ("waiting", "Jobs in the lane's queue no worker took yet (every priority list summed)"),
    ("reserved", "Jobs workers took and have not acknowledged (running, or prefetched)"),
    ("running", "Jobs of the capability running now (both lanes share its slots: never sum lanes)"),
    ("oldest_waiting_seconds", "Seconds the oldest admitted job no worker started has waited"),
    ("service_seconds", "Mean seconds a done job of the capability held its slot (0: none yet)"),
    ("workers", "Live workers taking the lane's jobs (paused ones left out)"),
    ("slots", "Jobs those workers run at once (their processes or threads)"),
    ("paused", "1 while the lane's queue is paused (its jobs wait, however many workers)"),
    ("finish_estimate_seconds", "Seconds a job sent now would take to finish (+Inf: no slot)"),
)


@dataclass(frozen=True, slots=True)
class _Figures:
    lanes: Sequence[LaneQueue]
    signals: dict[str, QueueSignals]
    live: Sequence[WorkerInfo]
    paused: set[str]

    def families(self) -> Iterator[Metric]:
        for name, doc in FAMILIES:
            family = GaugeMetricFamily(f"mcp_media_queue_{name}", doc, labels=LABELS)
            for lane in self.lanes:
                family.add_metric(lane.labels, self._value(name, lane))
            yield family

    def _value(self, name: str, lane: LaneQueue) -> float:
        signals = self.signals[lane.queue]
        if name == "workers":
            return len(self._consuming(lane))
        if name == "slots":
            return self._slots(lane)
        if name == "paused":
            return float(bool({lane.queue, lane.spec.queue} & self.paused))
        if name == "finish_estimate_seconds":
            return self._finish(signals, lane)
        if name == "oldest_waiting_seconds":
            return signals.oldest_waiting_s
        if name == "service_seconds":
            return signals.service_s
        return float(getattr(signals, name))

    def kept(self) -> Iterator[Metric]:
        """The series of earlier releases, by queue: the same figures as `waiting` and
        `workers` (these counted only the queue's own list and every worker announcing it)."""
        depth = GaugeMetricFamily(
            "mcp_media_queue_depth", "Jobs waiting in each queue (as ..._waiting)", labels=["queue"]
        )
        workers = GaugeMetricFamily(
            "mcp_media_workers", "Live workers per queue (as ..._workers)", labels=["queue"]
        )
        for lane in self.lanes:
            depth.add_metric([lane.queue], self.signals[lane.queue].waiting)
            workers.add_metric([lane.queue], len(self._consuming(lane)))
        yield depth
        yield workers

    def _consuming(self, lane: LaneQueue) -> list[WorkerInfo]:
        return [w for w in self.live if consuming(w, lane)]

    def _slots(self, lane: LaneQueue) -> int:
        return sum(w.concurrency or 1 for w in self._consuming(lane))

    def _finish(self, signals: QueueSignals, lane: LaneQueue) -> float:
        slots = self._slots(lane)
        if not slots:
            return math.inf if signals.waiting or signals.running else 0.0
        return expected_finish(signals.waiting, signals.running, slots, signals.service_s)
