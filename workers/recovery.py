"""Bringing back jobs whose worker died, in seconds rather than after the visibility timeout.

Every submitted job has a record (task, arguments, queue, limits) in Redis and in a journal
on disk (`<home>/jobs/<job id>.json`, fsynced before the message is sent). While a worker
holds a job (reserved or running), its main process renews a short lease on it. When a
worker dies (SIGKILL, OOM, node loss) its leases stop being renewed; any live worker's
reaper then re-sends those jobs with the same id. The stale copy that Redis restores later,
after the visibility timeout, finds the result already written and does nothing.

Leases only cover jobs some worker took. A message can also vanish with no holder at all:
kombu's Redis transport pops a message (BRPOP) and records it in its unacked hash in a
second round trip, so a broker that goes away between the two (shutdown, SIGKILL) leaves
the message in neither place; a crash of the broker's machine can also drop the last second
of writes (AOF everysec), submissions included. The journal sweep closes that gap: a
journalled job with no finished result, no message in its queue and no live lease for
SWEEP_GRACE seconds is re-sent with its id. The journal entry is removed once the result
is written, so it only ever holds jobs that are not finished.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from celery import Celery

from pipelines.results import ResultKey
from workers import keys
from workers.store import ResultStore

log = logging.getLogger("mcp_media.recovery")

LEASE_SECONDS = 15.0
HEARTBEAT_SECONDS = 3.0
# A journalled job may be unaccounted for (no result, not queued, not leased) this long
# before it is re-sent: longer than a lease and than any retry countdown, during which a
# message is held by a worker without being queued.
SWEEP_GRACE = 20.0
SWEEP_EVERY = 2  # heartbeats between sweeps
# A started job is held while its key's claim lives (the stage renews it); this long after
# its start a request without a claim is not running anything.
START_GRACE = 10.0
# A worker holding no job while its queues have messages waiting, and receiving none, for
# this long is alive but not consuming: its consumer is made to reconnect.
STALL_SECONDS = 30.0

# Take expired leases atomically so that one reaper alone re-sends a job.
_TAKE_EXPIRED = """
local ids = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(ids) do redis.call('zrem', KEYS[1], id) end
return ids
"""


@dataclass(frozen=True, slots=True)
class Entry:
    job_id: str
    body: dict[str, Any]
    touched: float  # submission or last re-send, unix time


class Journal:
    """Submitted, unfinished jobs as files next to the results: what survives Redis losing
    its last writes. One fsynced file per job, removed once its result is written."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of(cls, store: ResultStore) -> Journal:
        # `<home>/jobs`, beside `<home>/results` (the sidecars): the same shared volume.
        return cls(store.sidecars.root.parent / "jobs")

    def _path(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id[:80]!r}")
        return self.root / f"{job_id}.json"

    def add(self, job_id: str, body: dict[str, Any]) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(self._path(job_id))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise

    def touch(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.utime(self._path(job_id))

    def remove(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(job_id).unlink()

    def get(self, job_id: str) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = json.loads(self._path(job_id).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return body

    def entries(self) -> Iterator[Entry]:
        if not self.root.is_dir():
            return
        for path in self.root.glob("*.json"):
            try:
                touched = path.stat().st_mtime
                body = json.loads(path.read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):
                continue
            yield Entry(path.stem, body, touched)


def record_job(
    store: ResultStore,
    job_id: str,
    task: str,
    kwargs: dict[str, Any],
    queue: str,
    limits: tuple[float, float],
    ttl: int,
) -> None:
    """Journal the job on disk (durable), then record it in Redis; call before sending it."""
    body = {"task": task, "kwargs": kwargs, "queue": queue, "soft": limits[0], "hard": limits[1]}
    Journal.of(store).add(job_id, {**body, "ttl": ttl})
    store.redis.set(keys.job_record(job_id), json.dumps(body), ex=ttl)


def forget_record(store: ResultStore, job_id: str) -> None:
    """The job was never sent (the client got an error): nothing may re-send it."""
    Journal.of(store).remove(job_id)
    with contextlib.suppress(redis.RedisError):
        store.redis.delete(keys.job_record(job_id))


def renew_leases(
    client: redis.Redis[bytes], job_ids: list[str], lease: float = LEASE_SECONDS
) -> None:
    if job_ids:
        expiry = time.time() + lease
        client.zadd(keys.LEASES, dict.fromkeys(job_ids, expiry))


def drop_lease(client: redis.Redis[bytes], job_id: str) -> None:
    client.zrem(keys.LEASES, job_id)


def _settled(store: ResultStore, job_id: str, record: dict[str, Any]) -> bool:
    """The job's key has a finished result that answers this job."""
    envelope = store.get(ResultKey.parse(record["kwargs"]["key"]))
    if envelope is None or not envelope.status.finished:
        return False
    forced = bool((record["kwargs"].get("params") or {}).get("force"))
    return not forced or envelope.job_id == job_id


def _resend(app: Celery, store: ResultStore, job_id: str, record: dict[str, Any]) -> None:
    body = {k: record[k] for k in ("task", "kwargs", "queue", "soft", "hard")}
    ttl = int(record.get("ttl") or 86400)
    key = ResultKey.parse(record["kwargs"]["key"])
    pipe = store.redis.pipeline()
    pipe.set(keys.job_record(job_id), json.dumps(body), ex=ttl)  # lost with the AOF tail?
    pipe.set(keys.inflight(key), job_id, nx=True, ex=ttl)
    pipe.set(keys.job(job_id), str(key), nx=True, ex=ttl)
    pipe.execute()
    app.send_task(
        record["task"],
        kwargs=record["kwargs"],
        task_id=job_id,
        queue=record["queue"],
        soft_time_limit=record["soft"],
        time_limit=record["hard"],
    )


def _record(store: ResultStore, journal: Journal, job_id: str) -> dict[str, Any] | None:
    raw = store.redis.get(keys.job_record(job_id))
    if raw is not None:
        record: dict[str, Any] = json.loads(raw)
        return record
    return journal.get(job_id)


SETTLE_SECONDS = LEASE_SECONDS + HEARTBEAT_SECONDS


def broker_settled(client: redis.Redis[bytes], settle: float = SETTLE_SECONDS) -> bool:
    """The broker has been up for a whole lease: an expired lease now means a dead holder.

    During a broker outage nobody can renew a lease, so every lease of a live worker looks
    expired when Redis comes back; reaping then would re-send jobs that are still running
    (and their claims, expired too, would not stop a second run)."""
    if settle <= 0:
        return True
    uptime = int(client.info("server").get("uptime_in_seconds", 0))
    return uptime >= settle


def reap(app: Celery, store: ResultStore, settle: float = SETTLE_SECONDS) -> list[str]:
    """Re-send every job whose lease expired and whose result is not written yet."""
    if not broker_settled(store.redis, settle):
        return []
    take = store.redis.register_script(_TAKE_EXPIRED)
    journal = Journal.of(store)
    resent = []
    for raw in take(keys=[keys.LEASES], args=[time.time()]):
        job_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        record = _record(store, journal, job_id)
        if record is None:
            continue
        if _settled(store, job_id, record):
            journal.remove(job_id)
            continue
        _resend(app, store, job_id, record)
        journal.touch(job_id)
        log.warning("re-sent job %s: its worker stopped renewing its lease", job_id)
        resent.append(job_id)
    return resent


def held_jobs(
    client: redis.Redis[bytes],
    reserved: list[Any],
    active: list[Any],
    now: float | None = None,
) -> list[str]:
    """The ids of the jobs this worker really holds, from Celery's request objects.

    Waiting (reserved, not started) requests are held. A started request is held while its
    key's claim exists or for START_GRACE after its start. Celery's state sets are not
    proof enough: after a connection loss they can keep a request that already ended (the
    consumer's clean-up races the pool finishing the task), and leasing it would keep its
    job away from the reaper for as long as the request object lives (minutes, measured)."""
    now = time.time() if now is None else now
    requests = {r.id: r for r in [*reserved, *active]}
    started = {r.id: r for r in requests.values() if getattr(r, "time_start", None)}
    held = [job_id for job_id in requests if job_id not in started]
    recent = [i for i, r in started.items() if now - float(r.time_start) < START_GRACE]
    held += recent
    claims: dict[str, str] = {}
    for job_id, request in started.items():
        if job_id in recent:
            continue
        try:
            claims[job_id] = keys.claim(ResultKey.parse(str((request.kwargs or {})["key"])))
        except (KeyError, ValueError, TypeError):
            held.append(job_id)  # not one of ours: keep the old rule
    if claims:
        pipe = client.pipeline()
        for name in claims.values():
            pipe.exists(name)
        held += [i for i, alive in zip(claims, pipe.execute(), strict=True) if alive]
    return held


def _leased(client: redis.Redis[bytes], now: float) -> set[str]:
    return {raw.decode() for raw in client.zrangebyscore(keys.LEASES, now, "+inf")}


def _queued(client: redis.Redis[bytes], queue: str, wanted: set[str]) -> set[str]:
    """Which of `wanted` have a message waiting in `queue` (kombu's Redis list)."""
    found: set[str] = set()
    start, chunk = 0, 1000
    while found != wanted:
        raws = client.lrange(queue, start, start + chunk - 1)
        for raw in raws:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                job_id = json.loads(raw)["headers"]["id"]
                if job_id in wanted:
                    found.add(job_id)
        if len(raws) < chunk:
            break
        start += chunk
    return found


def sweep(
    app: Celery,
    store: ResultStore,
    grace: float = SWEEP_GRACE,
    now: float | None = None,
    settle: float = SETTLE_SECONDS,
) -> list[str]:
    """Re-send journalled jobs nobody will deliver: no finished result, no message waiting
    in their queue, no live lease, for `grace` seconds. Drop the entries of finished jobs."""
    journal = Journal.of(store)
    now = time.time() if now is None else now
    stale = [e for e in journal.entries() if now - e.touched >= grace]
    if not stale or not broker_settled(store.redis, settle):
        return []
    open_jobs = []
    for entry in stale:
        if _settled(store, entry.job_id, entry.body):
            journal.remove(entry.job_id)
        else:
            open_jobs.append(entry)
    if not open_jobs:
        return []
    # Leases before and after the queues: a message popped in between is leased by then.
    held = _leased(store.redis, now)
    by_queue: dict[str, set[str]] = {}
    for entry in open_jobs:
        if entry.job_id not in held:
            by_queue.setdefault(entry.body["queue"], set()).add(entry.job_id)
    queued = set().union(*(_queued(store.redis, q, ids) for q, ids in by_queue.items()))
    held |= _leased(store.redis, time.time())
    resent = []
    for entry in open_jobs:
        if entry.job_id in held or entry.job_id in queued:
            continue
        _resend(app, store, entry.job_id, entry.body)
        journal.touch(entry.job_id)
        log.warning(
            "re-sent job %s: submitted, not finished, not queued and held by no worker",
            entry.job_id,
        )
        resent.append(entry.job_id)
    return resent


class Heartbeat:
    """Runs in a worker's main process: renews its jobs' leases, reaps dead workers' jobs,
    sweeps the journal, and restarts its own consumer when it stops consuming."""

    def __init__(self, app: Celery, store: ResultStore, consumer: Any = None) -> None:
        self.app = app
        self.store = store
        self.consumer = consumer
        self.received = time.monotonic()
        self._idle_since: float | None = None
        self._to_lease: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-media-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def lease(self, job_id: str) -> None:
        """Lease a job this worker just received, from the heartbeat thread, at once.

        Called in the consumer's event loop (task_received): it must never wait on Redis
        there. A Redis call retried through a broker outage (about 30 s) would freeze the
        consumer: it would neither notice the lost connection nor take messages, and every
        claim and lease of this worker would expire meanwhile."""
        self.received = time.monotonic()
        with self._lock:
            self._to_lease.add(job_id)
        self._wake.set()

    def _lease_received(self) -> None:
        with self._lock:
            job_ids, self._to_lease = list(self._to_lease), set()
        try:
            renew_leases(self.store.redis, job_ids)
        except Exception:
            with self._lock:
                self._to_lease.update(job_ids)  # the next beat leases them with the rest
            raise

    def watch(self, held: int, now: float | None = None) -> bool:
        """True (and the consumer told to reconnect) when this worker holds no job, its
        queues have had messages waiting for STALL_SECONDS and it received none of them.

        A healthy consumer with free capacity takes a waiting message within milliseconds;
        one that does not (a consumer left without credit or without its socket in the event
        loop after a broker restart) holds no lease, so nothing else would notice it."""
        now = time.monotonic() if now is None else now
        queues = [q for q in os.environ.get("MCP_MEDIA_WORKER_QUEUES", "").split(",") if q]
        waiting = sum(int(self.store.redis.llen(q)) for q in queues)
        if (
            held
            or not waiting
            or (self._idle_since is not None and self.received > self._idle_since)
        ):
            self._idle_since = None if held or not waiting else now
            return False
        if self._idle_since is None:
            self._idle_since = now
            return False
        if now - self._idle_since < STALL_SECONDS:
            return False
        self._idle_since = None
        log.error(
            "consumer stalled: %d messages waiting on %s, none received for %.0f s while idle; "
            "reconnecting to the broker",
            waiting,
            ",".join(queues),
            STALL_SECONDS,
        )
        self._reconnect()
        return True

    def _reconnect(self) -> None:
        """Make Celery's own connection-loss path run: a fresh connection, channel, QoS and
        event-loop registration. Raised inside the event loop, where the consumer lives."""
        consumer = self.consumer
        hub = getattr(consumer, "hub", None)
        if hub is None:
            log.error("no event loop to restart the consumer in; restart this worker")
            return
        errors = [e for e in consumer.connection_errors if issubclass(e, Exception)]
        error = errors[0] if errors else ConnectionError

        def fail() -> None:
            raise error("mcp-media: consumer stalled, reconnecting")

        hub.call_soon(fail)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _announce(self) -> None:
        """Register this worker (queues, pool, processes, threads) for `mcp-media status`."""
        info = os.environ.get("MCP_MEDIA_WORKER_INFO")
        if info:
            data = json.loads(info)
            data["seen"] = time.time()
            self.store.redis.hset(keys.WORKERS, data["name"], json.dumps(data))

    def forget(self) -> None:
        info = os.environ.get("MCP_MEDIA_WORKER_INFO")
        if info:
            self.store.redis.hdel(keys.WORKERS, json.loads(info)["name"])

    def _sweep(self) -> None:
        """One worker at a time sweeps the journal (the lock expires by itself)."""
        lock_ms = int(HEARTBEAT_SECONDS * SWEEP_EVERY * 1000)
        if self.store.redis.set(keys.SWEEP_LOCK, str(os.getpid()), nx=True, px=lock_ms):
            sweep(self.app, self.store)

    def _run(self) -> None:
        from celery.worker import state

        beats = 0
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.is_set():
            self._wake.wait(max(0.0, next_beat - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._lease_received()
            except Exception:
                log.warning("could not lease received jobs", exc_info=True)
            if time.monotonic() < next_beat:
                continue
            next_beat = time.monotonic() + HEARTBEAT_SECONDS
            beats += 1
            try:
                self._announce()
                held = held_jobs(
                    self.store.redis, list(state.reserved_requests), list(state.active_requests)
                )
                renew_leases(self.store.redis, held)
                reap(self.app, self.store)
                if beats % SWEEP_EVERY == 0:
                    self._sweep()
                if self.consumer is not None:
                    self.watch(len(held))
            except Exception:  # the broker may be restarting: try again next beat
                log.warning("heartbeat failed", exc_info=True)
