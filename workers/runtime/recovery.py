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
import time
from typing import Any

import redis
from celery import Celery

from pipelines.results import ResultKey
from workers.core import keys
from workers.files.journal import JobJournal
from workers.state.shared_state import SharedState

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


def renew_leases(
    client: redis.Redis[bytes], job_ids: list[str], lease: float = LEASE_SECONDS
) -> None:
    if job_ids:
        expiry = time.time() + lease
        client.zadd(keys.LEASES, dict.fromkeys(job_ids, expiry))


def drop_lease(client: redis.Redis[bytes], job_id: str) -> None:
    client.zrem(keys.LEASES, job_id)


SETTLE_SECONDS = LEASE_SECONDS + HEARTBEAT_SECONDS

# How long the Redis we talk to has served us. Its identity is its run_id (a new process)
# and its replication id (a replica promoted keeps its run_id and its long uptime, but takes
# a new replication id). A stored identity that differs means a restart or a failover: the
# time counts from now, the first time anyone sees it. No stored identity (a new or
# flushed Redis): from the server's own start. All in the server's clock, in one step.
_SERVED_FOR = """
local server = redis.call('info', 'server')
local replication = redis.call('info', 'replication')
local identity = (string.match(server, 'run_id:(%w+)') or '?') .. ':' ..
  (string.match(replication, 'master_replid:(%w+)') or '?')
local t = redis.call('time')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local since = now - tonumber(string.match(server, 'uptime_in_seconds:(%d+)') or '0')
local stored = redis.call('get', KEYS[1])
if stored then
  local seen, at = string.match(stored, '^(%S+) (%S+)$')
  if seen == identity then return tostring(now - tonumber(at)) end
  since = now
end
redis.call('set', KEYS[1], identity .. ' ' .. string.format('%.3f', since))
return tostring(now - since)
"""


def served_for(client: redis.Redis[bytes]) -> float:
    """Seconds the Redis behind `client` has served this cluster as the same server."""
    raw = client.register_script(_SERVED_FOR)(keys=[keys.BROKER_IDENTITY])
    return float(raw.decode() if isinstance(raw, bytes) else raw)


def broker_settled(client: redis.Redis[bytes], settle: float = SETTLE_SECONDS) -> bool:
    """The broker has served us for a whole lease: an expired lease now means a dead holder.

    During a broker outage (a restart, or a failover to a replica) nobody can renew a lease,
    so every lease of a live worker looks expired when Redis comes back; reaping then would
    re-send jobs that are still running (and their claims, expired too, would not stop a
    second run). A promoted replica's own uptime says nothing of that outage: see
    `served_for`."""
    if settle <= 0:
        return True
    return served_for(client) >= settle


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


class Recovery:
    """Re-sending the jobs nobody will deliver, through the Celery `app`: what the broker
    `client` holds of them (leases, queued messages), the shared `state` (their results and
    records) and the `journal` say which."""

    def __init__(
        self, app: Celery, client: redis.Redis[bytes], state: SharedState, journal: JobJournal
    ) -> None:
        self.app = app
        self.redis = client
        self.state = state
        self.journal = journal

    def reap(self, settle: float = SETTLE_SECONDS) -> list[str]:
        """Re-send every job whose lease expired and whose result is not written yet."""
        if not broker_settled(self.redis, settle):
            return []
        take = self.redis.register_script(_TAKE_EXPIRED)
        resent = []
        for raw in take(keys=[keys.LEASES], args=[time.time()]):
            job_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            record = self._record(job_id)
            if record is None:
                continue
            if self._settled(job_id, record):
                self.journal.remove(job_id)
                continue
            self._resend(job_id, record)
            self.journal.touch(job_id)
            log.warning("re-sent job %s: its worker stopped renewing its lease", job_id)
            resent.append(job_id)
        return resent

    def sweep(
        self, grace: float = SWEEP_GRACE, now: float | None = None, settle: float = SETTLE_SECONDS
    ) -> list[str]:
        """Re-send journalled jobs nobody will deliver: no finished result, no message waiting
        in their queue, no live lease, for `grace` seconds. Drop the entries of finished
        jobs."""
        now = time.time() if now is None else now
        stale = [e for e in self.journal.entries() if now - e.touched >= grace]
        if not stale or not broker_settled(self.redis, settle):
            return []
        open_jobs = []
        for entry in stale:
            if self._settled(entry.job_id, entry.body, entry.touched):
                self.journal.remove(entry.job_id)
            else:
                open_jobs.append(entry)
        if not open_jobs:
            return []
        # Leases before and after the queues: a message popped in between is leased by then.
        held = _leased(self.redis, now)
        by_queue: dict[str, set[str]] = {}
        for entry in open_jobs:
            if entry.job_id not in held:
                by_queue.setdefault(entry.body["queue"], set()).add(entry.job_id)
        queued = set().union(*(_queued(self.redis, q, ids) for q, ids in by_queue.items()))
        held |= _leased(self.redis, time.time())
        resent = []
        for entry in open_jobs:
            if entry.job_id in held or entry.job_id in queued:
                continue
            self._resend(entry.job_id, entry.body)
            self.journal.touch(entry.job_id)
            log.warning(
                "re-sent job %s: submitted, not finished, not queued and held by no worker",
                entry.job_id,
            )
            resent.append(entry.job_id)
        return resent

    def _record(self, job_id: str) -> dict[str, Any] | None:
        record = self.state.records.job_record(job_id)
        return record if record is not None else self.journal.get(job_id)

    def _settled(self, job_id: str, record: dict[str, Any], since: float | None = None) -> bool:
        """The job's key has a finished result that answers this job: any, or for a forced
        job its own or one started after the job was submitted (`since` for records written
        before they said when). A later forced job of the same key (a second `reprocess
        --all`) answers an earlier one: else each would re-send the other's job for ever."""
        envelope = self.state.results.get(ResultKey.parse(record["kwargs"]["key"]))
        if envelope is None or not envelope.status.finished:
            return False
        forced = bool((record["kwargs"].get("params") or {}).get("force"))
        if not forced or envelope.job_id == job_id:
            return True
        submitted = record.get("submitted", since)
        started = envelope.started_at
        return submitted is not None and started is not None and started >= float(submitted)

    def _resend(self, job_id: str, record: dict[str, Any]) -> None:
        body = {k: record[k] for k in ("task", "kwargs", "queue", "soft", "hard")}
        if "submitted" in record:
            body["submitted"] = record["submitted"]
        ttl = int(record.get("ttl") or 86400)
        key = ResultKey.parse(record["kwargs"]["key"])
        # Its record, in-flight entry and key, as the gateway and admission left them (lost
        # with the AOF tail?), then the message again, with the job's own id.
        pipe = self.redis.pipeline()
        pipe.set(keys.job_record(job_id), json.dumps(body), ex=ttl)
        pipe.set(keys.inflight(key), job_id, nx=True, ex=ttl)
        pipe.set(keys.job(job_id), str(key), nx=True, ex=ttl)
        pipe.execute()
        self.app.send_task(
            record["task"],
            kwargs=record["kwargs"],
            task_id=job_id,
            queue=record["queue"],
            soft_time_limit=record["soft"],
            time_limit=record["hard"],
        )
