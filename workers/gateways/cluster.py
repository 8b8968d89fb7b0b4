"""MediaClient: the job gateway of the Celery/Redis cluster.

Every door submits through it: one atomic admission per key (answered by a stored result,
joined to the job in flight, refused over the high water, else enqueued), then waits that
follow the events channel and match the job they were handed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from pipelines.errors import PermanentError
from pipelines.media import Capability
from pipelines.render import audio_tag
from pipelines.results import Envelope, ResultKey, Status
from workers.broker.replies import broker_outcome
from workers.broker.target import mask
from workers.core import keys
from workers.core.capabilities import CAPABILITIES, Lane, lane_queues
from workers.core.catalog import Catalog
from workers.core.gateway import Admission, JobGateway, JobHandle, QueueBusy, QueueFull, answers
from workers.core.outcomes import Failure, Outcome
from workers.core.settings import Settings
from workers.files.blobs import BlobRef
from workers.files.node_cache import NodeCache, input_ref
from workers.files.shared_files import SharedFiles, open_shared_files
from workers.gateways.announced import Announcements
from workers.gateways.digest_text import digest_here
from workers.gateways.waits import Waits, wait_for, wait_for_async
from workers.state.admission import Decision, Submission, WaitBudget
from workers.state.cancellation import progress as job_progress
from workers.state.cancellation import request_cancel
from workers.state.chunks import Chunk
from workers.state.events import EventFollower
from workers.state.shared_state import SharedState, broker_client, redis_state

__all__ = ["JobHandle", "MediaClient"]

log = logging.getLogger(__name__)

STREAM_BLOCK_MS = 500


class MediaClient(JobGateway):
    runs_here = False
    # What a broker that does not answer raises: the doors answer these with a 503.
    unavailable: tuple[type[Exception], ...] = (redis.RedisError, OperationalError)

    def __init__(
        self,
        settings: Settings,
        app: Celery,
        client: redis.Redis[bytes],
        files: SharedFiles | None = None,
    ) -> None:
        self.settings = settings
        self.app = app
        self.redis = client
        self.files = files or open_shared_files(settings)
        self.journal = self.files.journal
        # What the nodes share through Redis, port by port (closed with the client).
        self.state: SharedState = redis_state(
            client, self.files.sidecars, settings.jobs.result_ttl, settings.redis_transport_options
        )
        # Inputs are put in the blob store before their message is sent; outputs are
        # fetched into this machine's cache, so every path a door hands out is local.
        self.node = NodeCache(settings.media_cache(), self.files.blobs, 0)
        self.events = EventFollower(client)
        self._waits = Waits(self.events, self.state.results, self.localised)
        self._versions: dict[Capability, str] = {}
        self.announcements = Announcements(self.state.view)

    @classmethod
    def connect(
        cls,
        settings: Settings | None = None,
        url: str | None = None,
        files: SharedFiles | None = None,
        *,
        bounded: bool = False,
    ) -> MediaClient:
        """A client of `url`, else of MCP_MEDIA_REDIS_URL or the embedded broker. `files`
        are shared files the caller has checked; without them the settings' are opened and
        checked here. `bounded`: a broker that is gone raises within the API's broker
        timeouts (a door answering a waiting caller) instead of being waited out."""
        from workers.broker.celery_config import base_app, bound_sending
        from workers.broker.embedded import broker_url

        settings = settings or Settings()
        if files is None:
            files = open_shared_files(settings)
            files.blobs.check()
        url = url or broker_url(settings.home, settings.redis_url).url
        client = broker_client(settings, url, bounded=bounded)
        app = base_app(settings, url)
        if bounded:
            bound_sending(app, settings.api.broker_connect_timeout, settings.api.broker_timeout)
        return cls(settings, app, client, files)

    def fault(self, exc: BaseException) -> Failure | None:
        """The failure `exc` names when the broker cannot serve: it does not answer, or it
        refuses writes because it cannot persist (Redis MISCONF). None for anything else (a
        bug is not an outage)."""
        outcome = broker_outcome(exc)
        if outcome is None and isinstance(exc, OperationalError):
            outcome = Outcome.BROKER_UNAVAILABLE
        where = mask(str(self.app.conf.broker_url))
        if outcome is Outcome.BROKER_CANNOT_PERSIST:
            return Failure(
                outcome,
                f"the broker ({where}) refuses writes because it cannot save to its disk "
                f"(Redis MISCONF): free space on the broker's disk; {str(exc)[:200]}",
            )
        if outcome is Outcome.BROKER_UNAVAILABLE:
            return Failure(outcome, f"the broker ({where}) does not answer: {str(exc)[:200]}")
        return None

    def close(self, finish_jobs: bool = False) -> None:
        """Disconnect (the jobs run on the cluster's workers, whatever `finish_jobs` says)."""
        self.events.close()
        self.state.close()
        self.app.close()

    def version(self, capability: Capability, params: Mapping[str, Any] | None = None) -> str:
        """The processor version a job gets where it will run: what the live workers serving
        its queue announce (a producer needs no models, nor the workers' settings); this
        process's own settings only while no worker has announced one."""
        spec = CAPABILITIES[capability]
        announced = self.announced(capability)
        if announced is not None:
            return spec.version_from(announced, params)
        if params:
            return spec.version(self.settings, params)
        if capability not in self._versions:
            self._versions[capability] = spec.version(self.settings)
        return self._versions[capability]

    def announced(self, capability: Capability) -> dict[str, Any] | None:
        return self.announcements.announced(capability)

    def key(
        self, capability: Capability, sha256: str, params: Mapping[str, Any] | None = None
    ) -> ResultKey:
        return ResultKey(capability, self.version(capability, params), sha256)

    def catalog(self) -> Catalog:
        """What the live workers of the tts and stt queues announce they serve (the same
        announcement that keys their jobs); this door's configured voice while no tts
        worker names one."""
        return self.announcements.catalog(self.settings.tts.voice)

    def serving(self, queue: str) -> int:
        return len(self.state.view.serving(queue))

    def get(self, key: ResultKey) -> Envelope | None:
        found = self.state.results.get(key)
        return self.localised(found) if found is not None else None

    def localised(self, envelope: Envelope) -> Envelope:
        """The envelope with its output blob (spoken audio) in this machine's cache and its
        path and media tag pointing there: made on another node, it is fetched once. A
        digest's text likewise, saved beside this machine's copy of the document."""
        if envelope.key.capability is Capability.DOCUMENT_DIGEST and self.files.shared_nothing:
            return digest_here(self.node, envelope, self.settings.max_blob_bytes)
        if not isinstance(envelope.output.get("blob"), dict):
            return envelope
        given = envelope.output.get("path")
        if isinstance(given, str) and self._in_cache(Path(given)):
            return envelope
        try:
            ref = BlobRef.from_json(envelope.output["blob"])
            local = self.node.local(ref)
        except Exception as exc:
            # Never hand out another machine's path (a node without MCP_MEDIA_STORE__URL
            # among nodes with one, or a bucket that lost the blob): say why instead.
            reason = f"output blob not available on this machine: {exc}"
            if not self.files.shared_nothing:
                reason += " (is MCP_MEDIA_STORE__URL set on the workers but not here?)"
            log.warning("%s: %s", envelope.key, reason)
            output = {k: v for k, v in envelope.output.items() if k not in ("path", "media_tag")}
            return replace(envelope, status=Status.DEGRADED, output=output, reason=reason[:500])
        output = {**envelope.output, "path": str(local)}
        if "media_tag" in output:
            output["media_tag"] = audio_tag(local, str(output.get("format") or ""))
        return replace(envelope, output=output)

    def _in_cache(self, path: Path) -> bool:
        try:
            return path.is_file() and path.resolve().is_relative_to(self.node.cache.root.resolve())
        except OSError:
            return False

    def _input(self, capability: Capability, sha256: str, path: Path) -> BlobRef:
        """The message's reference to its input (in this machine's cache)."""
        return input_ref(CAPABILITIES[capability].input_kind, path, sha256)

    def submit_one(
        self,
        capability: Capability,
        sha256: str,
        path: Path,
        *,
        trace_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        force: bool = False,
        limit: bool = False,
        ref: BlobRef | None = None,
        within: float | None = None,
        lane: Lane = Lane.LIVE,
    ) -> JobHandle:
        """One admission for the key: see `workers.state.admission_lua.ADMIT`. The job waits
        in its capability's `lane` queue (a door's live, reprocess's batch). `limit` refuses
        it with `QueueFull` when that lane is at its high water (`JOBS__HIGH_WATER`, batch:
        `JOBS__BATCH_HIGH_WATER`); without it the job is always accepted.
        `within`: the seconds the caller waits for the job; a new job expected to finish
        later, by the work ahead of it, is refused with `QueueBusy` (`workers.core.wait_estimate`).
        A stored result or the job in flight for the key always answers."""
        spec = CAPABILITIES[capability]
        key = self.key(capability, sha256, params)
        # The input goes into the blob store first (a `ref` from a listing of the store is
        # there already). A blob the store did not hold (blobs are never deleted from it)
        # has no result anywhere: its key's look-up then skips the sidecar, a round trip to
        # the bucket.
        fresh = False
        if ref is None:
            ref = self._input(capability, sha256, path)
            if ref.text is None and self.files.shared_nothing:
                fresh = self.node.blobs.put(ref, path)
        # The look-up also re-indexes a result Redis lost; the script decides.
        existing = self.state.results.get(key, sidecar=not fresh)
        if answers(existing, None, force):
            assert existing is not None
            return JobHandle.settled(key, path, self.localised(existing))
        size = ref.size
        soft, hard = spec.time_limits(self.settings, size)
        inflight_ttl = int(hard * (self.settings.jobs.max_deliveries + 1) + 600)
        jobs, queue = self.settings.jobs, spec.lane_queue(lane)
        high_water = jobs.batch_high_water if lane is Lane.BATCH else jobs.high_water
        job_id = str(uuid.uuid4())
        budget = WaitBudget(within, self.slots(spec.queue)) if within is not None else None
        admitted = self.state.admission.admit(
            Submission(key, job_id, inflight_ttl, queue, high_water * limit, force, budget)
        )
        if admitted.decision is Decision.SETTLED:
            assert admitted.envelope is not None
            return JobHandle.settled(key, path, self.localised(admitted.envelope))
        if admitted.decision is Decision.REFUSED:
            raise QueueFull(queue, admitted.waiting, high_water)
        if admitted.decision is Decision.BUSY:
            assert within is not None
            raise QueueBusy(queue, admitted.expected, within)
        if admitted.decision is Decision.JOINED:
            assert admitted.job_id is not None
            return JobHandle(
                admitted.job_id, key, path, Status.PENDING, admission=Admission.JOINED, force=force
            )
        kwargs: dict[str, Any] = {
            "key": str(key),
            "blob": ref.to_json(),
            "trace_id": trace_id,
            "params": dict(params or {}),
        }
        if not self.files.shared_nothing:
            # One shared home: a worker of the previous version (a rolling upgrade) reads
            # the path; this version reads the blob.
            kwargs["path"] = str(path)
        try:
            record = {
                "task": spec.task_name,
                "kwargs": kwargs,
                "queue": queue,
                "soft": soft,
                "hard": hard,
                # A forced job is answered by a result started after this (recovery).
                "submitted": time.time(),
            }
            # Durable first (what re-sends the job if its message is lost), then in Redis.
            self.journal.add(job_id, {**record, "ttl": inflight_ttl})
            self.state.records.record_job(job_id, record, inflight_ttl)
            self.app.send_task(
                spec.task_name,
                kwargs=kwargs,
                task_id=job_id,
                queue=queue,
                soft_time_limit=soft,
                time_limit=hard,
            )
        except Exception:
            # Never sent: nothing may re-send it.
            self.state.admission.forget_job(key, job_id)
            self.state.admission.started(queue, job_id)
            self.journal.remove(job_id)
            self.state.records.forget_record(job_id)
            raise
        return JobHandle(job_id, key, path, Status.PENDING, force=force)

    def slots(self, queue: str) -> int:
        """The slots of the live workers consuming `queue` (paused ones take nothing)."""
        serving = [w for w in self.state.view.serving(queue) if queue not in w.paused]
        return sum(w.concurrency or 1 for w in serving)

    def finish_estimate(self, handle: JobHandle) -> float | None:
        """Seconds until the handle's job, still waiting in its lane, should finish (by its
        position and the mean service time); None once a worker started it. The door refuses
        a caller late by it (`workers.core.wait_estimate.refuse_late`); a door that joined a
        job reprocess queued is estimated by its place in the batch lane (not moved ahead)."""
        spec = CAPABILITIES[handle.key.capability]
        estimate, slots = self.state.admission.finish_estimate, self.slots(spec.queue)
        found = (estimate(queue, handle.id, slots) for queue in spec.lane_queues)
        return next((seconds for seconds in found if seconds is not None), None)

    def read_chunks(self, handle: JobHandle, after: str, block_ms: int) -> Sequence[Chunk]:
        """The chunks of a streaming job after `after`, waiting up to `block_ms` for one."""
        return self.state.chunks.read(keys.chunks(handle.key), after, block_ms)

    def stream(self, handle: JobHandle, timeout: float) -> Iterator[bytes]:
        """The output of a streaming job (submitted with `params={"stream": keys.chunks(key)}`)
        as its worker hands it over; ends at the job's end mark, or when a result answers the
        job without one (a joined job that was not streamed: read its stored file instead).
        Raises `PermanentError` with the reason when the job failed while streaming."""
        after = "0"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunks = self.read_chunks(handle, after, STREAM_BLOCK_MS)
            for chunk in chunks:
                after = chunk.id
                if chunk.end:
                    if chunk.error:
                        raise PermanentError(chunk.error)
                    return
                yield chunk.data
            if not chunks and handle.answered_by(self.state.results.get(handle.key)):
                return
        raise TimeoutError(f"the job {handle.id} streamed nothing more for {timeout:.0f} s")

    def recorded_input(self, job_id: str) -> Path | None:
        """The local file of a job's input, from its record (Redis, else the journal)."""
        record = self.state.records.job_record(job_id) or self.journal.get(job_id)
        kwargs = (record or {}).get("kwargs") or {}
        blob, path = kwargs.get("blob"), kwargs.get("path")
        if isinstance(blob, dict):
            try:
                return self.node.find(BlobRef.from_json(blob))
            except PermanentError:
                return None
        return Path(path) if isinstance(path, str) else None

    def cancel(self, job_id: str) -> None:
        request_cancel(self.state.coordination, job_id)

    def progress(self, job_id: str) -> float | None:
        done = job_progress(self.state.coordination, job_id)
        return float(done["done_s"]) if done is not None else None

    def waiting(self) -> dict[str, int]:
        """Jobs waiting in each lane's queue (sent, not yet taken by a worker)."""
        return self.state.view.queue_lengths(lane_queues())

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
        served = {queue for worker in self.state.view.live_workers() for queue in worker.queues}
        return {queue: found for queue, found in waiting.items() if queue not in served}

    def wait(self, handles: list[JobHandle], timeout: float) -> list[JobHandle]:
        """Each handle with the envelope that answers its job, or as it was at the deadline
        (`workers.gateways.waits`)."""
        return wait_for(self._waits, handles, timeout)

    async def wait_async(self, handle: JobHandle, timeout: float) -> JobHandle:
        """`wait` for one handle without holding a thread while it waits."""
        return await wait_for_async(self._waits, handle, timeout)

    def result(self, ident: str) -> tuple[str | None, ResultKey | None, Envelope | None]:
        """A result by job id or by sha256 (newest processor version for that hash)."""
        if len(ident) == 64 and all(c in "0123456789abcdef" for c in ident):
            for capability in Capability:
                key = self.state.results.latest_key(capability.value, ident)
                current = self.key(capability, ident)
                for candidate in (current, key):
                    if candidate is None:
                        continue
                    envelope = self.get(candidate)
                    if envelope is not None:
                        return envelope.job_id, candidate, envelope
                    job = self.state.admission.inflight_job(candidate)
                    if job is not None:
                        return job, candidate, None
            return None, None, None
        key = self.state.results.key_for_job(ident)
        if key is None:
            return ident, None, None
        return ident, key, self.get(key)
