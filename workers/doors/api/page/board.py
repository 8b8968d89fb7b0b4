"""What the jobs page shows and what it steers, read from and sent to the cluster.

Everything comes from the machinery the CLI uses: what it shows from the read-only cluster
view (queue lengths, counters, the workers' announcements, dead letters, pauses, a reprocess
run's report and lock, the newest results); what it steers through the gateway's ports
(pauses, dead letters), `workers.doors.reprocess` (runs and their tally) and the cluster's
control (pause/resume, pool size). Calls block on Redis: the routes run them in a thread.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey
from workers.broker.remote_control import BUSY, CONTROL_TIMEOUT
from workers.core import keys
from workers.core.announcements import WorkerInfo
from workers.core.capabilities import CAPABILITIES, QUEUES
from workers.core.settings import Settings
from workers.doors.api.errors import ApiError
from workers.doors.reprocess import AlreadyRunning, Selection, run

if TYPE_CHECKING:
    from workers.gateways.cluster import MediaClient

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
    """One per serve process, on the app's gateway to the cluster."""

    def __init__(self, settings: Settings, client: MediaClient) -> None:
        self.settings = settings
        self.client = client
        self._lock = threading.Lock()
        self._runs: set[str] = set()

    # what the page shows

    def snapshot(self) -> dict[str, Any]:
        view = self.client.state.view
        workers = view.live_workers()
        waiting = view.queue_lengths(QUEUES)
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
                    "waiting": waiting[spec.queue],
                    "running": sum(w.active_by_queue.get(spec.queue, 0) for w in workers),
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
        view = self.client.state.view
        report = view.report(keys.reprocess_progress(kind.value))
        if report is None:
            return None
        report["locked"] = view.locked(keys.reprocess_lock(kind.value))
        finished = report["done"] + report["degraded"] + report["failed"]
        if report["running"]:
            total = max(report["selected"], 1)
            report["percent"] = min(99, 100 * finished // total) if report["selected"] else 0
        else:
            report["percent"] = 100
        report["finished"] = finished
        return report

    def recent(self, limit: int = RECENT_SHOWN) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.client.state.view.recent_results(limit)]  # type: ignore[misc]

    def search(self, query: str) -> Found:
        query = query.strip()
        if _SHA256.fullmatch(query.lower()):
            query = query.lower()
        elif not _JOB_ID.fullmatch(query):
            raise ApiError(400, "search by a sha256 (64 hex digits) or a job id", code="bad_search")
        job_id, key, envelope = self.client.result(query)
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
        view = self.client.state.view
        with self._lock:
            if kind.value in self._runs or view.locked(keys.reprocess_lock(kind.value)):
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
            with open(os.devnull, "w") as quiet:
                run(self.client, selection, out=quiet)
        except AlreadyRunning as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("reprocess run from the page failed")
        finally:
            with self._lock:
                for kind in selection.kinds:
                    self._runs.discard(kind.value)

    def _serving(self, queue: str) -> list[str]:
        return [w.name for w in self.client.state.view.live_workers() if queue in w.queues]

    def pause(self, queue: str, paused: bool) -> str:
        if queue not in QUEUES:
            raise ApiError(400, f"unknown queue {queue[:40]!r}; one of {', '.join(QUEUES)}")
        self.client.state.coordination.set_paused(queue, paused)
        names = self._serving(queue)
        told = self.client.control.consume(queue, not paused, names)
        verb = "paused" if paused else "resumed"
        return f"{queue} {verb}; {told} of {len(names)} live worker(s) confirmed"

    def resize(self, worker: str, delta: int) -> str:
        if delta not in (-1, 1):
            raise ApiError(400, "concurrency changes by one at a time (+1 or -1)")
        found = [w for w in self.client.state.view.live_workers() if w.name == worker]
        if not found:
            raise ApiError(404, f"no live worker named {worker[:120]!r}", code="unknown_worker")
        info = found[0]
        if delta < 0 and (info.concurrency or 1) <= 1:
            raise ApiError(409, f"{info.name} already runs a single process or thread")
        answers = self.client.control.resize(info.name, info.pool, delta)
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
        for entry in self.client.state.view.dead_letters(keys.DEAD_LETTERS_READ):
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
        client = self.client
        path = client.recorded_input(job_id)
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
        handle = client.submit_one(key.capability, key.sha256, path)
        client.state.dead_letters.drop(job_id)
        return f"retried as job {handle.id}"

    def clear(self, job_id: str | None) -> str:
        dead_letters = self.client.state.dead_letters
        if job_id is None:
            return f"cleared {dead_letters.clear()} dead letter(s)"
        self._dead_entry(job_id)
        dead_letters.drop(job_id)
        return f"cleared the dead letter of job {job_id}"


def _worker_row(worker: WorkerInfo) -> dict[str, Any]:
    row = worker.to_json()
    node = worker.name.rpartition("@")[2]
    row["node"] = node
    return row
