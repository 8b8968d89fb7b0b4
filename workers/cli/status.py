"""`mcp-media status`: queues, result counts, workers online, dead letters."""

from __future__ import annotations

import json
import time
from typing import Any

from workers import keys
from workers.broker import broker_url, mask_url
from workers.capabilities import CAPABILITIES, QUEUES
from workers.celery_app import base_app
from workers.settings import Settings
from workers.store import redis_store


def collect(settings: Settings, inspect_timeout: float = 1.0) -> dict[str, Any]:
    url = broker_url(settings.home, settings.redis_url).url
    store = redis_store(settings, url)
    app = base_app(settings, url)
    try:
        redis = store.redis
        inspector = app.control.inspect(timeout=inspect_timeout)
        active = inspector.active() or {}
        queues_by_worker = inspector.active_queues() or {}
        stats = inspector.stats() or {}
        running: dict[str, int] = dict.fromkeys(QUEUES, 0)
        for jobs in active.values():
            for job in jobs:
                queue = (job.get("delivery_info") or {}).get("routing_key")
                if queue in running:
                    running[queue] += 1
        registry = {
            name.decode(): json.loads(raw) for name, raw in redis.hgetall(keys.WORKERS).items()
        }
        workers = []
        for name in sorted(set(queues_by_worker) | set(stats)):
            announced = registry.get(name, {})
            workers.append(
                {
                    "name": name,
                    "queues": [q["name"] for q in queues_by_worker.get(name, [])],
                    "concurrency": (stats.get(name) or {}).get("pool", {}).get("max-concurrency"),
                    "threads": announced.get("threads"),
                    "pool": announced.get("pool"),
                    "active": len(active.get(name, [])),
                }
            )
        # Workers that stopped answering but announced themselves lately: shown as silent.
        for name, announced in sorted(registry.items()):
            if name not in {w["name"] for w in workers} and time.time() - announced["seen"] < 30:
                workers.append({**announced, "active": None, "silent": True})
        return {
            "broker": mask_url(url),
            "queues": {q: {"waiting": int(redis.llen(q)), "running": running[q]} for q in QUEUES},
            "results": {
                spec.capability.value: store.status_counts(spec.capability.value)
                for spec in CAPABILITIES.values()
            },
            "workers": workers,
            "dead_letters": int(redis.llen(keys.DEAD_LETTERS)),
        }
    finally:
        store.redis.close()
        app.close()


def format_status(report: dict[str, Any]) -> str:
    lines = [f"broker: {report['broker']}", "queues:"]
    for name, q in report["queues"].items():
        lines.append(f"  {name:7} waiting={q['waiting']} running={q['running']}")
    lines.append("results:")
    for cap, counts in report["results"].items():
        shown = " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"
        lines.append(f"  {cap:17} {shown}")
    lines.append(f"workers online: {len(report['workers'])}")
    for w in report["workers"]:
        lines.append(
            f"  {w['name']} queues={','.join(w['queues'])} pool={w.get('pool')} "
            f"concurrency={w['concurrency']} threads={w.get('threads')}"
            + (" (not answering)" if w.get("silent") else "")
        )
    lines.append(f"dead letters: {report['dead_letters']}")
    return "\n".join(lines) + "\n"
