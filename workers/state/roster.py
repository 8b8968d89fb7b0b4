"""What only the broker knows of the cluster: its clock, the workers that announced
themselves (written by each worker's heartbeat, `workers.runtime.heartbeat`), how many
jobs wait in each queue (Celery's lists) and the signals an autoscaler reads of each queue
(`QueueSignals`: Celery's lists and the messages workers hold, with what admission keeps of
the queue). The part of the read-only cluster view (`workers.core.cluster_view`) that no
other port holds: its Redis adapter and its in-memory twin.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import redis

from workers.broker.message_keys import MessageKeys
from workers.core import keys
from workers.core.capabilities import for_queue
from workers.core.cluster_view import QueueSignals

# A scrape reads at most this many of the messages workers hold (Celery's `unacked` hash:
# about one per slot of every live worker, more only while a dead worker's messages wait to
# be restored); past it each queue's share of those read stands for the whole hash.
HELD_READ = 1000
# The jobs at the head of a queue's admission order looked at for the oldest one still
# admitted (expired ones stay there until the next admission to the queue prunes them).
HEAD_READ = 64

# Read only: what admission keeps of one queue (`workers.state.admission`): the jobs
# running (entries of the running set not expired), the seconds the oldest job admitted and
# not started has waited (-1: none), and the mean service time. By the broker's clock.
# KEYS: queued, admitted, running, service.  ARGV: how many of the head to look at.
_ADMITTED = """
local t = redis.call('time')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local running = redis.call('zcount', KEYS[3], string.format('(%.6f', now), '+inf')
local age = -1
local head = redis.call('zrange', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #head, 2 do
  local expiry = redis.call('zscore', KEYS[2], head[i])
  if expiry and tonumber(expiry) > now then
    age = math.max(now - tonumber(head[i + 1]), 0)
    break
  end
end
return {running, tostring(age), redis.call('hget', KEYS[4], 'mean') or '0'}
"""

# Read only: how many of the messages workers hold (kombu's `unacked` hash) belong to each
# queue, by the routing key each entry ends with (Celery routes a task by its queue's
# name), reading at most ARGV[1] entries, ARGV[2] per HSCAN step; only the tail of an entry
# is looked at, so a long message costs no more than a short one (one with an escaped
# routing key is decoded whole). Returns: entries in all, entries read, then queue, count...
# KEYS: unacked.
_HELD = r"""
local total = redis.call('hlen', KEYS[1])
local counts, read, cursor = {}, 0, '0'
repeat
  local found = redis.call('hscan', KEYS[1], cursor, 'COUNT', ARGV[2])
  cursor = found[1]
  for i = 2, #found[2], 2 do
    local entry = found[2][i]
    local queue = string.match(string.sub(entry, -256), '"([^"\\]*)"%]$')
    if not queue then
      local ok, decoded = pcall(cjson.decode, entry)
      queue = ok and type(decoded) == 'table' and tostring(decoded[3]) or ''
    end
    counts[queue] = (counts[queue] or 0) + 1
    read = read + 1
  end
until cursor == '0' or read >= tonumber(ARGV[1])
local out = {total, read}
for queue, n in pairs(counts) do
  out[#out + 1] = queue
  out[#out + 1] = n
end
return out
"""


def shared_queue(queue: str) -> str:
    """Where admission keeps a lane's running jobs and service mean: its capability's queue,
    which both lanes share as they share the workers' slots (a queue of no capability: its own)."""
    try:
        return for_queue(queue).queue
    except KeyError:
        return queue


def broker_now(client: redis.Redis[bytes]) -> float:
    """The broker's clock: workers on other nodes announce themselves by it, and admission
    decides by it, so that no node's clock skew moves either."""
    seconds, micros = client.time()
    return float(seconds) + float(micros) / 1e6


class Roster(Protocol):
    def now(self) -> float:
        """The clock the announcements' `seen` is read against."""
        ...

    def announcements(self) -> dict[str, dict[str, Any]]:
        """Each worker's last announcement, by name, however old (malformed ones left out)."""
        ...

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        """Jobs waiting in each queue (sent, not yet taken by a worker)."""
        ...

    def queue_signals(self, queues: Sequence[str]) -> dict[str, QueueSignals]:
        """Each queue's signals (`workers.core.cluster_view.QueueSignals`)."""
        ...


class RedisRoster:
    """The roster of a Redis broker whose messages kombu keeps as `messages` says."""

    def __init__(self, client: redis.Redis[bytes], messages: MessageKeys | None = None) -> None:
        self.redis = client
        self.messages = messages or MessageKeys()
        self._admitted = client.register_script(_ADMITTED)
        self._held = client.register_script(_HELD)

    def now(self) -> float:
        return broker_now(self.redis)

    def announcements(self) -> dict[str, dict[str, Any]]:
        found = {}
        for raw_name, raw in self.redis.hgetall(keys.WORKERS).items():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                found[raw_name.decode()] = data
        return found

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        pipe = self.redis.pipeline(transaction=False)
        self._lengths(pipe, queues)
        return self._summed(queues, pipe.execute())

    def _lengths(self, pipe: redis.client.Pipeline[bytes], queues: Sequence[str]) -> None:
        for queue in queues:
            for name in self.messages.lists(queue):
                pipe.llen(name)

    def _summed(self, queues: Sequence[str], lengths: list[Any]) -> dict[str, int]:
        found, at = {}, 0
        for queue in queues:
            step = len(self.messages.lists(queue))
            found[queue] = sum(int(n) for n in lengths[at : at + step])
            at += step
        return found

    def queue_signals(self, queues: Sequence[str]) -> dict[str, QueueSignals]:
        """One round trip: every list's length, each queue's admission figures and the
        messages workers hold (at most HELD_READ of them read)."""
        pipe = self.redis.pipeline(transaction=False)
        self._lengths(pipe, queues)
        for queue in queues:
            self._admitted(
                keys=[
                    keys.queued(queue),
                    keys.admitted(queue),
                    keys.running(shared_queue(queue)),
                    keys.service(shared_queue(queue)),
                ],
                args=[HEAD_READ],
                client=pipe,
            )
        self._held(keys=[self.messages.unacked], args=[HELD_READ, 100], client=pipe)
        found = pipe.execute()
        lists = sum(len(self.messages.lists(q)) for q in queues)
        waiting = self._summed(queues, found[:lists])
        admitted = found[lists : lists + len(queues)]
        held = _held_by_queue(found[-1])
        signals = {}
        for queue, (running, age, mean) in zip(queues, admitted, strict=True):
            signals[queue] = QueueSignals(
                waiting=waiting[queue],
                reserved=held.get(queue, 0),
                running=int(running),
                oldest_waiting_s=max(float(age), 0.0),
                service_s=float(mean),
            )
        return signals


def _held_by_queue(reply: list[Any]) -> dict[str, int]:
    """`_HELD`'s reply as a count per queue; when it read only part of the hash, each
    queue's share of what it read, scaled to the whole."""
    total, read = int(reply[0]), int(reply[1])
    pairs = reply[2:]
    counts = {
        (q.decode() if isinstance(q, bytes) else str(q)): int(n)
        for q, n in zip(pairs[::2], pairs[1::2], strict=True)
    }
    if read and total > read:
        return {q: round(n * total / read) for q, n in counts.items()}
    return counts


class AdmittedJobs(Protocol):
    """What the twin's roster reads of the admission twin (no broker: nothing else holds
    jobs), `workers.state.admission_twin.CountedAdmission`."""

    def waiting(self, queue: str) -> int: ...
    def running(self, queue: str) -> int: ...
    def oldest_admitted(self, queue: str) -> float | None: ...
    def service_time(self, queue: str) -> float: ...


class MemoryRoster:
    """The twin, for one process: announcements made here (`announce`, stamped `seen` by
    `clock` unless they say when), and queues as the admission twin counts them (no message
    list exists without a broker: a job admitted and not started is waiting, one started is
    running and held by the process that runs it)."""

    def __init__(self, jobs: AdmittedJobs, clock: Callable[[], float] = time.monotonic) -> None:
        self._jobs = jobs
        self._clock = clock
        self._lock = threading.Lock()
        self._announced: dict[str, str] = {}  # name -> JSON, as a heartbeat writes it

    def announce(self, name: str, announcement: dict[str, Any]) -> None:
        with self._lock:
            self._announced[name] = json.dumps({"seen": self._clock(), **announcement})

    def now(self) -> float:
        return self._clock()

    def announcements(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: json.loads(raw) for name, raw in self._announced.items()}

    def queue_lengths(self, queues: Sequence[str]) -> dict[str, int]:
        return {queue: self._jobs.waiting(queue) for queue in queues}

    def queue_signals(self, queues: Sequence[str]) -> dict[str, QueueSignals]:
        now, jobs = self._clock(), self._jobs
        signals = {}
        for queue in queues:
            running, oldest = jobs.running(queue), jobs.oldest_admitted(queue)
            signals[queue] = QueueSignals(
                waiting=jobs.waiting(queue),
                # no broker holds messages here: what runs counts as held, on its live lane
                reserved=running if shared_queue(queue) == queue else 0,
                running=running,
                oldest_waiting_s=max(now - oldest, 0.0) if oldest is not None else 0.0,
                service_s=jobs.service_time(queue),
            )
        return signals
