"""`mcp-media status`: queues (each lane: live `vision`, batch `vision.batch`), result counts,
workers online, dead letters.

Everything comes from Redis in a few round trips: queue lengths, result counters, and the
workers' own announcements (refreshed every few seconds by their heartbeat). Nothing is
broadcast to the workers, so the answer does not wait on a reply timeout.
"""

from __future__ import annotations

from typing import Any

from workers.broker.embedded import broker_url
from workers.broker.target import RedisTarget
from workers.core.capabilities import CAPABILITIES, lane_queues
from workers.core.settings import Settings
from workers.files.shared_files import open_shared_files
from workers.state.shared_state import broker_client, redis_state


def collect(settings: Settings, url: str | None = None) -> dict[str, Any]:
    url = url or broker_url(settings.home, settings.redis_url).url
    files = open_shared_files(settings)
    client = broker_client(settings, url, bounded=True)  # a person waits: fail within seconds
    state = redis_state(
        client, files.sidecars, settings.jobs.result_ttl, settings.redis_transport_options
    )
    view = state.view
    try:
        workers = view.live_workers()
        lanes = lane_queues()
        waiting = view.queue_lengths(lanes)
        running = {q: sum(w.active_by_queue.get(q, 0) for w in workers) for q in lanes}
        return {
            "broker": RedisTarget.of(settings, url).where(),
            "store": files.blobs.describe(),
            "queues": {q: {"waiting": waiting[q], "running": running[q]} for q in lanes},
            "results": {
                spec.capability.value: view.status_counts(spec.capability.value)
                for spec in CAPABILITIES.values()
            },
            "workers": [w.to_json() for w in workers],
            "dead_letters": view.dead_letter_count(),
        }
    finally:
        state.close()


def _mib(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}MiB"


def format_status(report: dict[str, Any]) -> str:
    lines = [f"broker: {report['broker']}", f"store: {report['store']}", "queues:"]
    for name, q in report["queues"].items():
        lines.append(f"  {name:12} waiting={q['waiting']} running={q['running']}")
    lines.append("results:")
    for cap, counts in report["results"].items():
        shown = " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"
        lines.append(f"  {cap:17} {shown}")
    lines.append(f"workers online: {len(report['workers'])}")
    for w in report["workers"]:
        lines.append(
            f"  {w['name']} queues={','.join(w['queues'])} pool={w.get('pool')} "
            f"concurrency={w['concurrency']} threads={w.get('threads')} "
            f"active={w.get('active')} rss={_mib(w.get('rss_mib'))} seen={w['age_s']:.0f}s ago"
        )
    lines.append(f"dead letters: {report['dead_letters']}")
    return "\n".join(lines) + "\n"
