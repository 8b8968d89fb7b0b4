"""LocalStore: the in-memory twin of the Redis result store, for one process.

It keeps the `ResultStore` contract without a broker: `--inline` runs use it (with the
sidecar files as the truth, so results survive the process and dedup across runs), and
unit tests use it to check claims, dead letters and dedup without any service. Claims and
slots expire like their Redis counterparts; a lock makes it safe across threads.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.outcomes import Outcome
from pipelines.results import Envelope, ResultFiles, ResultKey, Status
from workers.core.capabilities import CAPABILITIES
from workers.core.wait_estimate import (
    RUNNING_TTL,
    Admission,
    Admitted,
    WaitBudget,
    expected_finish,
    expected_wait,
    next_mean,
)
from workers.state.chunks import MAX_ENTRIES, Chunk, check_name
from workers.state.store import Claim


class LocalStore:
    def __init__(self, sidecars: ResultFiles, clock: Callable[[], float] = time.monotonic) -> None:
        self.sidecars = sidecars
        self._clock = clock
        self._lock = threading.Lock()
        self._results: dict[ResultKey, Envelope] = {}
        self._inflight: dict[ResultKey, str] = {}
        self._jobs: dict[str, ResultKey] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self._claims: dict[ResultKey, tuple[str, float]] = {}
        self._slots: dict[str, dict[str, float]] = {}
        self._deliveries: Counter[str] = Counter()
        self._dead: list[dict[str, Any]] = []
        self._counts: dict[str, Counter[str]] = {}
        # queue -> admitted jobs no worker started -> expiry, in admission order (a dict keeps
        # insertion order: the Redis store's `keys.queued`)
        self._admitted: dict[str, dict[str, float]] = {}
        self._running: dict[str, dict[str, float]] = {}
        self._service: dict[str, tuple[float, int]] = {}  # queue -> (mean seconds, jobs)
        self._paused: set[str] = set()
        self._locks: dict[str, tuple[str, float]] = {}
        self._reports: dict[str, tuple[dict[str, Any], float]] = {}
        self._streams: dict[str, list[Chunk]] = {}
        self._appended = threading.Condition(self._lock)

    def get(self, key: ResultKey, sidecar: bool = True) -> Envelope | None:
        with self._lock:
            found = self._results.get(key)
        if found is None and sidecar:
            found = self.sidecars.read(key)
            if found is not None:
                with self._lock:
                    self._results[key] = found
        return found

    def get_many(self, wanted: list[ResultKey]) -> dict[ResultKey, Envelope]:
        return {key: env for key in wanted if (env := self.get(key)) is not None}

    def put(self, envelope: Envelope, *, sidecar: bool = True) -> None:
        if sidecar:
            self.sidecars.write(envelope)
        with self._lock:
            before = self._results.get(envelope.key)
            self._results[envelope.key] = envelope
            self._inflight.pop(envelope.key, None)
            if envelope.job_id:
                self._jobs[envelope.job_id] = envelope.key
            # Keys by the status they stand at: a failed job retried to done is done only.
            counts = self._counts.setdefault(envelope.key.capability.value, Counter())
            if before is not None and before.status is envelope.status:
                return
            if before is not None and counts[before.status.value] > 0:
                counts[before.status.value] -= 1
                if not counts[before.status.value]:
                    del counts[before.status.value]
            counts[envelope.status.value] += 1
            queue = CAPABILITIES[envelope.key.capability].queue
            expiry = self._running.get(queue, {}).pop(envelope.job_id or "", None)
            seconds = envelope.elapsed_ms / 1000
            if expiry is not None:  # its slot's time, from its start (`RedisStore.put`)
                seconds = max(seconds, self._clock() - (expiry - RUNNING_TTL))
            if envelope.status is Status.DONE and seconds > 0:
                mean, samples = self._service.get(queue, (0.0, 0))
                self._service[queue] = (next_mean(mean, samples, seconds), samples + 1)

    def admit(
        self,
        key: ResultKey,
        job_id: str,
        ttl: int,
        queue: str,
        high_water: int,
        force: bool,
        budget: WaitBudget | None = None,
    ) -> Admitted:
        now = self._clock()
        with self._lock:
            stored = self._results.get(key)
            if not force and stored is not None and stored.status is Status.DONE:
                return Admitted(Admission.SETTLED, envelope=stored)
            current = self._inflight.get(key)
            if current is not None:
                return Admitted(Admission.JOINED, job_id=current)
            waiting = self._waiting(queue, now)
            if high_water > 0 and len(waiting) >= high_water:
                return Admitted(Admission.REFUSED, waiting=len(waiting))
            if budget is not None:
                running = self._running_now(queue, now)
                mean = self._service.get(queue, (0.0, 0))[0]
                expected = expected_wait(len(waiting), len(running), budget.slots, mean)
                if expected is not None and expected > budget.seconds:
                    return Admitted(Admission.BUSY, expected=expected)
            self._inflight[key] = job_id
            self._jobs[job_id] = key
            waiting[job_id] = now + ttl
            return Admitted(Admission.QUEUED, job_id=job_id)

    def _waiting(self, queue: str, now: float) -> dict[str, float]:
        waiting = self._admitted.setdefault(queue, {})
        for stale in [j for j, expiry in waiting.items() if expiry <= now]:
            del waiting[stale]
        return waiting

    def _running_now(self, queue: str, now: float) -> dict[str, float]:
        running = self._running.setdefault(queue, {})
        for stale in [j for j, expiry in running.items() if expiry <= now]:
            del running[stale]
        return running

    def finish_estimate(self, queue: str, job_id: str, slots: int) -> float | None:
        now = self._clock()
        with self._lock:
            waiting = list(self._waiting(queue, now))
            if job_id not in waiting:
                return None
            running = len(self._running_now(queue, now))
            mean = self._service.get(queue, (0.0, 0))[0]
            return expected_finish(waiting.index(job_id), running, slots, mean)

    def started(self, queue: str, job_id: str) -> None:
        with self._lock:
            self._admitted.get(queue, {}).pop(job_id, None)
            self._running.setdefault(queue, {})[job_id] = self._clock() + RUNNING_TTL

    def service_time(self, queue: str) -> float:
        with self._lock:
            return self._service.get(queue, (0.0, 0))[0]

    def record_job(self, job_id: str, record: dict[str, Any], ttl: int) -> None:
        with self._lock:
            self._records[job_id] = dict(record)

    def forget_record(self, job_id: str) -> None:
        with self._lock:
            self._records.pop(job_id, None)

    def forget_job(self, key: ResultKey, job_id: str) -> None:
        with self._lock:
            if self._inflight.get(key) == job_id:
                del self._inflight[key]

    def inflight_job(self, key: ResultKey) -> str | None:
        with self._lock:
            return self._inflight.get(key)

    def key_for_job(self, job_id: str) -> ResultKey | None:
        with self._lock:
            return self._jobs.get(job_id)

    def latest_key(self, capability: str, sha256: str) -> ResultKey | None:
        with self._lock:
            for key in reversed(list(self._results)):
                if key.capability.value == capability and key.sha256 == sha256:
                    return key
        return None

    def count_delivery(self, job_id: str, ttl: int) -> int:
        with self._lock:
            self._deliveries[job_id] += 1
            return self._deliveries[job_id]

    def uncount_delivery(self, job_id: str) -> None:
        with self._lock:
            self._deliveries[job_id] -= 1

    def dead_letter(self, job_id: str, key: ResultKey, reason: str) -> None:
        entry = {"job_id": job_id, "key": str(key), "reason": reason, "at": time.time()}
        entry["outcome"] = Outcome.DEAD_LETTERED.value  # every dead letter's code
        with self._lock:
            self._dead.insert(0, entry)

    def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._dead[:limit])

    def dead_letter_counts(self) -> dict[str, int]:
        with self._lock:
            counts: Counter[str] = Counter(d["key"].split(":", 1)[0] for d in self._dead)
        return dict(counts)

    def drop_dead_letter(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            for index, entry in enumerate(self._dead):
                if entry.get("job_id") == job_id:
                    return self._dead.pop(index)
        return None

    def clear_dead_letters(self) -> int:
        with self._lock:
            count = len(self._dead)
            self._dead.clear()
            return count

    def set_paused(self, queue: str, paused: bool) -> None:
        with self._lock:
            (self._paused.add if paused else self._paused.discard)(queue)

    def paused_queues(self) -> set[str]:
        with self._lock:
            return set(self._paused)

    def take_lock(self, name: str, token: str, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            held = self._locks.get(name)
            if held is not None and held[1] > now:
                return False
            self._locks[name] = (token, now + ttl)
            return True

    def renew_lock(self, name: str, token: str, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            held = self._locks.get(name)
            if held is None or held[0] != token or held[1] <= now:
                return False
            self._locks[name] = (token, now + ttl)
            return True

    def release_lock(self, name: str, token: str) -> None:
        with self._lock:
            if self._locks.get(name, ("", 0.0))[0] == token:
                del self._locks[name]

    def locked(self, name: str) -> bool:
        with self._lock:
            held = self._locks.get(name)
            return held is not None and held[1] > self._clock()

    def put_report(self, name: str, report: dict[str, Any], ttl: int) -> None:
        with self._lock:
            self._reports[name] = (dict(report), self._clock() + ttl)

    def report(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._reports.get(name)
            return dict(found[0]) if found is not None and found[1] > self._clock() else None

    def job_record(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._records.get(job_id)
            return dict(found) if found is not None else None

    def append_chunk(self, name: str, data: bytes) -> None:
        self._add_chunk(name, data, end=False, error="")

    def end_chunks(self, name: str, error: str = "") -> None:
        self._add_chunk(name, b"", end=True, error=error)

    def _add_chunk(self, name: str, data: bytes, *, end: bool, error: str) -> None:
        with self._appended:
            stream = self._streams.setdefault(check_name(name), [])
            stream.append(Chunk(str(len(stream) + 1), data, end, error))
            del stream[:-MAX_ENTRIES]
            self._appended.notify_all()

    def read_chunks(self, name: str, after: str = "0", block_ms: int = 500) -> Sequence[Chunk]:
        check_name(name)
        seen = int(after.split("-")[0] or 0)
        deadline = time.monotonic() + block_ms / 1000
        with self._appended:
            while True:
                found = [c for c in self._streams.get(name, ()) if int(c.id) > seen]
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found[:64]
                self._appended.wait(left)

    def claim(self, key: ResultKey, ttl: float) -> Claim | None:
        now = self._clock()
        with self._lock:
            held = self._claims.get(key)
            if held is not None and held[1] > now:
                return None
            token = secrets.token_hex(8)
            self._claims[key] = (token, now + ttl)
            return Claim(key, token)

    def reclaim(self, claim: Claim, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            held = self._claims.get(claim.key)
            if held is not None and held[1] > now:
                return held[0] == claim.token
            self._claims[claim.key] = (claim.token, now + ttl)
            return True

    def renew(self, claim: Claim, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            held = self._claims.get(claim.key)
            if held is None or held[0] != claim.token or held[1] <= now:
                return False
            self._claims[claim.key] = (claim.token, now + ttl)
            return True

    def release(self, claim: Claim) -> None:
        with self._lock:
            held = self._claims.get(claim.key)
            if held is not None and held[0] == claim.token:
                del self._claims[claim.key]

    def claimed(self, key: ResultKey) -> bool:
        with self._lock:
            held = self._claims.get(key)
            return held is not None and held[1] > self._clock()

    def acquire_slot(self, name: str, limit: int, ttl: float) -> str | None:
        now = self._clock()
        with self._lock:
            slots = self._slots.setdefault(name, {})
            for token in [t for t, expiry in slots.items() if expiry <= now]:
                del slots[token]
            if len(slots) >= limit:
                return None
            token = secrets.token_hex(12)
            slots[token] = now + ttl
            return token

    def release_slot(self, name: str, token: str) -> None:
        with self._lock:
            self._slots.get(name, {}).pop(token, None)

    def status_counts(self, capability: str) -> dict[str, int]:
        with self._lock:
            return dict(self._counts.get(capability, Counter()))

    def close(self) -> None:
        pass
