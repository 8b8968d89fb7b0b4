"""MediaClient: submit the jobs an ingest needs, wait for them, fetch results.

Submissions are deduplicated across the cluster: a key already `done` is not submitted
again, and concurrent submitters of one key share one job id.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from celery import Celery

from pipelines.media import Capability, JobRequest
from pipelines.results import Envelope, ResultKey, Status
from workers.capabilities import CAPABILITIES
from workers.journal import Journal
from workers.settings import Settings
from workers.store import RedisStore, redis_store, settled

POLL = 0.05


@dataclass(frozen=True, slots=True)
class JobHandle:
    id: str
    key: ResultKey
    path: Path
    status: Status
    envelope: Envelope | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "capability": self.key.capability.value,
            "sha256": self.key.sha256,
            "id": self.id,
            "status": self.status.value,
            "result": self.envelope.to_json() if self.envelope is not None else None,
        }


class MediaClient:
    def __init__(self, settings: Settings, app: Celery, store: RedisStore) -> None:
        self.settings = settings
        self.app = app
        self.store = store
        self.journal = Journal.of(store)
        self._versions: dict[Capability, str] = {}

    @classmethod
    def connect(cls, settings: Settings | None = None, url: str | None = None) -> MediaClient:
        """A client of `url`, else of MCP_MEDIA_REDIS_URL or the embedded broker."""
        from workers.broker import broker_url
        from workers.celery_app import base_app

        settings = settings or Settings()
        url = url or broker_url(settings.home, settings.redis_url).url
        return cls(settings, base_app(settings, url), redis_store(settings, url))

    def close(self) -> None:
        self.store.close()
        self.app.close()

    def version(self, capability: Capability, params: Mapping[str, Any] | None = None) -> str:
        if params and params.get("language"):  # a request's own language: its own version
            return CAPABILITIES[capability].version_for(self.settings, params)
        if capability not in self._versions:
            self._versions[capability] = CAPABILITIES[capability].version(self.settings)
        return self._versions[capability]

    def key(
        self, capability: Capability, sha256: str, params: Mapping[str, Any] | None = None
    ) -> ResultKey:
        return ResultKey(capability, self.version(capability, params), sha256)

    def submit(
        self,
        jobs: Iterable[JobRequest],
        *,
        trace_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        force: bool = False,
    ) -> list[JobHandle]:
        return [
            self.submit_one(
                job.capability, job.sha256, job.path, trace_id=trace_id, params=params, force=force
            )
            for job in jobs
        ]

    def submit_one(
        self,
        capability: Capability,
        sha256: str,
        path: Path,
        *,
        trace_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        force: bool = False,
    ) -> JobHandle:
        spec = CAPABILITIES[capability]
        key = self.key(capability, sha256, params)
        existing = self.store.get(key)
        if settled(existing, force=force):
            assert existing is not None
            return JobHandle(existing.job_id or "-", key, path, existing.status, existing)
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        soft, hard = spec.time_limits(self.settings, size)
        inflight_ttl = int(hard * (self.settings.jobs.max_deliveries + 1) + 600)
        job_id = str(uuid.uuid4())
        current = self.store.reserve_job(key, job_id, inflight_ttl)
        if current != job_id:
            return JobHandle(current, key, path, Status.PENDING)
        kwargs = {
            "key": str(key),
            "path": str(path),
            "trace_id": trace_id,
            "params": dict(params or {}),
        }
        try:
            record = {
                "task": spec.task_name,
                "kwargs": kwargs,
                "queue": spec.queue,
                "soft": soft,
                "hard": hard,
            }
            # On disk first (durable), then in Redis: what re-sends it if the message is lost.
            self.journal.add(job_id, {**record, "ttl": inflight_ttl})
            self.store.record_job(job_id, record, inflight_ttl)
            self.app.send_task(
                spec.task_name,
                kwargs=kwargs,
                task_id=job_id,
                queue=spec.queue,
                soft_time_limit=soft,
                time_limit=hard,
            )
        except Exception:
            # Never sent: nothing may re-send it.
            self.store.forget_job(key, job_id)
            self.journal.remove(job_id)
            self.store.forget_record(job_id)
            raise
        return JobHandle(job_id, key, path, Status.PENDING)

    def unserved(self, handles: Iterable[JobHandle]) -> dict[str, list[JobHandle]]:
        """The unfinished handles whose queue no live worker serves, by queue.

        Their jobs stay queued (nothing is lost) until a worker for the queue starts;
        waiting for them before then only waits out the timeout.
        """
        waiting: dict[str, list[JobHandle]] = {}
        for handle in handles:
            if handle.envelope is None:
                waiting.setdefault(CAPABILITIES[handle.key.capability].queue, []).append(handle)
        if not waiting:
            return {}
        served = {queue for worker in self.store.live_workers() for queue in worker.queues}
        return {queue: found for queue, found in waiting.items() if queue not in served}

    def wait(self, handles: list[JobHandle], timeout: float) -> list[JobHandle]:
        """Poll until every handle has a finished envelope or the deadline passes."""
        deadline = time.monotonic() + timeout
        current = list(handles)
        polls = 0
        while True:
            open_keys = [h.key for h in current if h.envelope is None]
            if open_keys:
                found = self.store.get_many(open_keys)
                current = [
                    replace(h, envelope=found[h.key], status=found[h.key].status)
                    if h.envelope is None and h.key in found and found[h.key].status.finished
                    else h
                    for h in current
                ]
            if all(h.envelope is not None for h in current) or time.monotonic() >= deadline:
                return current
            # Short jobs finish within milliseconds: poll fast first, then back off.
            time.sleep(min(POLL, 0.002 * 2 ** min(polls, 5)))
            polls += 1

    def result(self, ident: str) -> tuple[str | None, ResultKey | None, Envelope | None]:
        """A result by job id or by sha256 (newest processor version for that hash)."""
        if len(ident) == 64 and all(c in "0123456789abcdef" for c in ident):
            for capability in Capability:
                key = self.store.latest_key(capability.value, ident)
                current = self.key(capability, ident)
                for candidate in (current, key):
                    if candidate is None:
                        continue
                    envelope = self.store.get(candidate)
                    if envelope is not None:
                        return envelope.job_id, candidate, envelope
                    job = self.store.inflight_job(candidate)
                    if job is not None:
                        return job, candidate, None
            return None, None, None
        key = self.store.key_for_job(ident)
        if key is None:
            return ident, None, None
        return ident, key, self.store.get(key)
