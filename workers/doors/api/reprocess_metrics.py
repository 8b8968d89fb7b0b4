"""`/metrics` gauges of the current (or last) reprocess run of each media kind (`kind="all"`
for a run over every kind), read from its report in Redis at scrape time, so every `serve`
process shows the same run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pipelines.ingest import JOB_FOR_KIND
from workers.core import keys

if TYPE_CHECKING:
    from workers.core.cluster_view import ClusterView

# (name, help, the report's figure)
GAUGES = (
    ("mcp_media_reprocess_total", "Items the reprocess run planned to submit", "total"),
    ("mcp_media_reprocess_submitted", "Items the reprocess run submitted so far", "enqueued"),
    ("mcp_media_reprocess_done", "Items of the reprocess run with a result so far", "finished"),
    ("mcp_media_reprocess_rate", "Results a second the reprocess run is getting", "rate"),
    ("mcp_media_reprocess_running", "1 while a reprocess run holds its lock", "running"),
)


class ReprocessCollector(Collector):
    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def describe(self) -> Iterator[Metric]:
        return iter(())  # no Redis call at registration (see ClusterCollector)

    def collect(self) -> Iterator[Metric]:
        figures: dict[str, dict[str, float]] = {}
        for kind in JOB_FOR_KIND:
            report = self.view.report(keys.reprocess_progress(kind.value))
            if report is None:
                continue
            running = bool(report.get("running")) and self.view.locked(
                keys.reprocess_lock(kind.value)
            )
            finished = sum(int(report.get(k, 0)) for k in ("done", "degraded", "failed"))
            # A run over several kinds writes one report under each: shown once, as `all`.
            covered = report.get("kinds") or [kind.value]
            label = "all" if len(covered) > 1 else str(covered[0])
            figures[label] = {
                "total": float(report.get("total", report.get("selected", 0))),
                "enqueued": float(report.get("enqueued", 0)),
                "finished": float(finished),
                "rate": float(report.get("rate") or 0.0) if running else 0.0,
                "running": 1.0 if running else 0.0,
            }
        for name, help_text, figure in GAUGES:
            gauge = GaugeMetricFamily(name, help_text, labels=["kind"])
            for kind_name, values in sorted(figures.items()):
                gauge.add_metric([kind_name], values[figure])
            yield gauge
