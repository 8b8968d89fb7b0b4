"""What a worker announces of itself in `mcp-media:workers` (see workers.runtime.heartbeat):
who serves which queue, how busy, what it runs of each capability."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker as it last announced itself: who serves which queue, how busy."""

    name: str
    queues: tuple[str, ...]
    pool: str | None
    concurrency: int | None
    threads: int | None
    pid: int | None
    active: int | None  # jobs running at the last heartbeat
    active_by_queue: dict[str, int]
    rss_mib: float | None  # main process and pool children together
    started_at: float | None  # unix time
    seen: float  # unix time (the broker's clock) of the last announcement
    age_s: float  # seconds since then
    paused: tuple[str, ...] = ()  # queues it serves but no longer consumes (paused)
    versions: dict[str, dict[str, Any]] = field(default_factory=dict)  # by capability

    @classmethod
    def from_announcement(cls, name: str, data: dict[str, Any], now: float) -> WorkerInfo:
        def number(field: str) -> Any:
            value = data.get(field)
            return value if isinstance(value, int | float) else None

        by_queue = data.get("active_by_queue")
        seen = float(data.get("seen") or 0.0)
        return cls(
            name=name,
            queues=tuple(str(q) for q in data.get("queues") or ()),
            pool=data.get("pool"),
            concurrency=number("concurrency"),
            threads=number("threads"),
            pid=number("pid"),
            active=number("active"),
            active_by_queue=dict(by_queue) if isinstance(by_queue, dict) else {},
            rss_mib=number("rss_mib"),
            started_at=number("started_at"),
            seen=seen,
            age_s=max(0.0, now - seen),
            paused=tuple(str(q) for q in data.get("paused") or ()),
            versions={
                str(cap): dict(found)
                for cap, found in (data.get("versions") or {}).items()
                if isinstance(found, dict) and isinstance(found.get("version"), str)
            }
            if isinstance(data.get("versions"), dict)
            else {},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "queues": list(self.queues),
            "pool": self.pool,
            "concurrency": self.concurrency,
            "threads": self.threads,
            "pid": self.pid,
            "active": self.active,
            "active_by_queue": self.active_by_queue,
            "rss_mib": self.rss_mib,
            "started_at": self.started_at,
            "seen": self.seen,
            "age_s": round(self.age_s, 3),
            "paused": list(self.paused),
            "versions": self.versions,
        }
