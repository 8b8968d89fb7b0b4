"""What the jobs page shows and what it steers: the cluster's operator ports
(`workers.core.operations`: queue lengths, counters, the workers' announcements, dead
letters, pauses, reprocess runs, pool sizes) and the job gateway (searches, retries). Calls
block on the broker: the routes run them in a thread.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey
from workers.core import keys
from workers.core.announcements import WorkerInfo
from workers.core.capabilities import CAPABILITIES, QUEUES, Lane, lane_queues
from workers.core.cluster_view import ClusterView
from workers.core.gateway import JobGateway
from workers.core.operations import (
    BUSY,
    CONTROL_TIMEOUT,
    AlreadyRunning,
    ClusterSteering,
    Selection,
)
from workers.core.settings import Settings
from workers.doors.api.errors import ApiError

log = logging.getLogger("mcp_media.page")

DEAD_SHOWN = 50
RECENT_SHOWN = 12
# The media kind each capability's reprocess walks (speech synthesis has no cached input).
KIND_OF = {
    Capability.VISION_SUMMARIZE: MediaKind.IMAGE,
    Capability.AUDIO_TRANSCRIBE: MediaKind.AUDIO,
}
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Found:
    """The answer to a search: a job id, its key and its result when there is one."""

    query: str
    job_id: str | None
    key: ResultKey | None
    envelope: Envelope | None


class Board:
    """One per serve process: the app's gateway, the cluster's view and its steering."""

    def __init__(
        self, settings: Settings, gateway: JobGateway, view: ClusterView, ops: ClusterSteering
    ) -> None:
        self.settings = settings
        self.gateway = gateway
        self.view = view
        self.ops = ops
        self._lock = threading.Lock()
        self._runs: set[str] = set()

    # what the page shows

    def snapshot(self) -> dict[str, Any]:
        view = self.view
        workers = view.live_workers()
        waiting = view.queue_lengths(lane_queues())
        paused = view.paused_queues()
        dead = view.dead_letters(DEAD_SHOWN)
        dead_by_capability = view.dead_letter_counts()
        tiles = []
        for spec in CAPABILITIES.values():
            name = spec.capability.value
            kind = KIND_OF.get(spec.capability)
            counts = view.status_counts(name)
            tiles.append(
                {
                    "capability": name,
                    "queue": spec.queue,
                    "kind": kind.value if kind is not None else None,
                    "waiting": sum(waiting[q] for q in spec.lane_queues),
                    "batch": waiting[spec.lane_queue(Lane.BATCH)],  # of them, in the batch lane
                    "running": sum(
                        w.active_by_queue.get(q, 0) for w in workers for q in spec.lane_queues
                    ),
                    "done": counts.get("done", 0),
                    "degraded": counts.get("degraded", 0),
                    "failed": counts.get("failed", 0),
                    "dead": dead_by_capability.get(name, 0),
                    "paused": spec.queue in paused,
                    "serving": [w.name for w in workers if spec.queue in w.queues],
                    "run": self._run_state(kind) if kind is not None else None,
                }
            )
        return {
            "tiles": tiles,
            "workers": [_worker_row(w) for w in workers],
            "dead": dead,
            "recent": self.recent(),
        }

    def _run_state(self, kind: MediaKind) -> dict[str, Any] | None:
        report = self.view.report(keys.reprocess_progress(kind.value))
        if report is None:
            return None
        report["locked"] = self.view.locked(keys.reprocess_lock(kind.value))
        finished = report["done"] + report["degraded"] + report["failed"]
        # `total` is what the run planned (after the point it resumed from); a report
        # written before runs counted their plan has only `selected`.
        report.setdefault("total", report["selected"])
        if report["running"]:
            total = max(report["total"], 1)
            report["percent"] = min(99, 100 * finished // total) if report["total"] else 0
        else:
            report["percent"] = 100
        report["finished"] = finished
        return report

    def recent(self, limit: int = RECENT_SHOWN) -> list[dict[str, Any]]:
        return [envelope.to_json() for envelope in self.view.recent_results(limit)]  # type: ignore[misc]

    def search(self, query: str) -> Found:
        query = query.strip()
        if _SHA256.fullmatch(query.lower()):
            query = query.lower()
        elif not _JOB_ID.fullmatch(query):
            raise ApiError(400, "search by a sha256 (64 hex digits) or a job id", code="bad_search")
        job_id, key, envelope = self.gateway.result(query)
        return Found(query, job_id, key, envelope)

    def media_path(self, sha256: str) -> Path | None:
        """The cached image or audio file named by this sha256 (nothing else, no path)."""
        if not _SHA256.fullmatch(sha256):
            return None
        found = self.settings.media_cache().find(sha256)
        if found is None:
            return None
        real = found.path.resolve()
        return real if real.is_relative_to(self.settings.cache_root.resolve()) else None

    # what the page steers

    def reprocess(self, kind_name: str, mode: str, include_degraded: bool) -> str:
        try:
            kind = MediaKind(kind_name)
        except ValueError:
            kind = None
        if kind not in KIND_OF.values() or mode not in ("missing", "all"):
            raise ApiError(400, "reprocess takes kind image|audio and mode missing|all")
        assert kind is not None
        if kind is MediaKind.IMAGE and self.settings.vision.resolved_provider == "none":
            raise ApiError(409, "vision is turned off (MCP_MEDIA_VISION__ENABLED/PROVIDER)")
        with self._lock:
            if kind.value in self._runs or self.view.locked(keys.reprocess_lock(kind.value)):
                raise ApiError(409, f"a reprocess run for {kind.value} is already going")
            self._runs.add(kind.value)
        selection = Selection(kinds=(kind,), mode=mode, include_degraded=include_degraded)
        threading.Thread(
            target=self._run, args=(selection,), name=f"reprocess-{kind.value}", daemon=True
        ).start()
        extra = " (degraded and failed included)" if include_degraded and mode == "missing" else ""
        return f"reprocess {mode} of {kind.value} started{extra}"

    def _run(self, selection: Selection) -> None:
        try:
            self.ops.reprocess(selection)
        except AlreadyRunning as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("reprocess run from the page failed")
        finally:
            with self._lock:
                for kind in selection.kinds:
                    self._runs.discard(kind.value)

    def pause(self, queue: str, paused: bool) -> str:
        if queue not in QUEUES:
            raise ApiError(400, f"unknown queue {queue[:40]!r}; one of {', '.join(QUEUES)}")
        told, names = self.ops.set_paused(queue, paused)
        verb = "paused" if paused else "resumed"
        return f"{queue} {verb}; {told} of {len(names)} live worker(s) confirmed"

    def resize(self, worker: str, delta: int) -> str:
        if delta not in (-1, 1):
            raise ApiError(400, "concurrency changes by one at a time (+1 or -1)")
        found = [w for w in self.view.live_workers() if w.name == worker]
        if not found:
            raise ApiError(404, f"no live worker named {worker[:120]!r}", code="unknown_worker")
        info = found[0]
        if delta < 0 and (info.concurrency or 1) <= 1:
            raise ApiError(409, f"{info.name} already runs a single process or thread")
        answers = self.ops.resize(info, delta)
        for answer in answers:
            if "error" in answer:
                raise ApiError(409, f"{info.name}: {answer['error']}", code="control_refused")
        if not answers:
            raise ApiError(504, f"{info.name} did not answer within {CONTROL_TIMEOUT:.0f} s")
        if delta < 0 and any(answer.get("pending") for answer in answers):
            return f"{info.name}: {BUSY}"
        if delta > 0 and any("pending" in answer for answer in answers):
            return f"{info.name}: a shrink that waited for a free process is cancelled"
        unit = "process" if info.pool == "prefork" else "thread"
        return f"{info.name}: pool {'grows' if delta > 0 else 'shrinks'} by one {unit}"

    def _dead_entry(self, job_id: str) -> dict[str, Any]:
        for entry in self.view.dead_letters(keys.DEAD_LETTERS_READ):
            if entry.get("job_id") == job_id:
                return entry
        raise ApiError(404, f"no dead letter for job {job_id[:80]!r}", code="unknown_dead_letter")

    def retry(self, job_id: str) -> str:
        """Submit the dead-lettered job's input again (a new job), then drop the letter."""
        entry = self._dead_entry(job_id)
        try:
            key = ResultKey.parse(str(entry.get("key")))
        except (ValueError, KeyError):
            raise ApiError(409, "this dead letter names no job key; clear it") from None
        path = self.ops.recorded_input(job_id)
        if path is None:
            cached = self.settings.media_cache().find(key.sha256)
            path = cached.path if cached is not None else None
        if path is None:
            raise ApiError(
                409,
                "the input of this job is no longer known (its record expired and it is not "
                "a cached image or audio file); clear it",
                code="input_gone",
            )
        handle = self.gateway.submit_one(key.capability, key.sha256, path)
        self.ops.drop_dead_letter(job_id)
        return f"retried as job {handle.id}"

    def clear(self, job_id: str | None) -> str:
        if job_id is None:
            return f"cleared {self.ops.clear_dead_letters()} dead letter(s)"
        self._dead_entry(job_id)
        self.ops.drop_dead_letter(job_id)
        return f"cleared the dead letter of job {job_id}"


def _worker_row(worker: WorkerInfo) -> dict[str, Any]:
    row = worker.to_json()
    node = worker.name.rpartition("@")[2]
    row["node"] = node
    return row
