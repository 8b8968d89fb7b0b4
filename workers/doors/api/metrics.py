"""`/metrics` in the Prometheus text format (prometheus_client, one registry per app).

Cluster figures (each lane's queue signals, `workers.doors.api.queue_metrics`; jobs by
status, dead letters) are read from Redis at scrape time, so every `serve` process reports
the same cluster; what this process saw
(requests, dedup hits, job latency, engine calls it caused) are its own counters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from workers.core.capabilities import CAPABILITIES
from workers.doors.api.queue_metrics import QueueCollector
from workers.doors.api.reprocess_metrics import ReprocessCollector

if TYPE_CHECKING:
    from workers.core.cluster_view import ClusterView

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "mcp_media_api_requests",
            "HTTP API requests answered, by route and status code",
            ["route", "code"],
            registry=self.registry,
        )
        self.dedup_hits = Counter(
            "mcp_media_api_dedup_hits",
            "Requests answered from a stored result, with no job run",
            ["capability"],
            registry=self.registry,
        )
        self.provider_calls = Counter(
            "mcp_media_api_provider_calls",
            "Jobs this process submitted to the speech engines, by outcome",
            ["capability", "status"],
            registry=self.registry,
        )
        self.job_seconds = Histogram(
            "mcp_media_api_job_seconds",
            "Seconds from submitting a job to its result, as this process waited for it",
            ["capability"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.realtime_sessions = Gauge(
            "mcp_media_api_realtime_sessions",
            "Realtime transcription sessions open on this process (/v1/realtime)",
            registry=self.registry,
        )

    def watch(self, view: ClusterView) -> None:
        self.registry.register(QueueCollector(view))
        self.registry.register(ClusterCollector(view))
        self.registry.register(ReprocessCollector(view))


class ClusterCollector(Collector):
    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def describe(self) -> Iterator[Metric]:
        """Nothing to check at registration: asking the broker then would keep `serve` from
        starting while it is down (a scrape answers 503 instead)."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "mcp_media_jobs",
            "Jobs finished in the cluster, by capability and status (from the result index)",
            labels=["capability", "status"],
        )
        for capability in CAPABILITIES:
            for status, count in sorted(self.view.status_counts(capability.value).items()):
                jobs.add_metric([capability.value, status], count)
        yield jobs
        dead = GaugeMetricFamily("mcp_media_dead_letters", "Jobs on the dead-letter list")
        dead.add_metric([], self.view.dead_letter_count())
        yield dead


def routes(counters: ApiMetrics) -> list[BaseRoute]:
    async def metrics(request: Request) -> Response:
        from anyio import to_thread

        body = await to_thread.run_sync(generate_latest, counters.registry)
        return Response(body, media_type=CONTENT_TYPE)

    return [Route("/metrics", metrics, methods=["GET"])]
