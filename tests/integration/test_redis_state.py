"""The Redis adapters of the shared state (their Lua scripts included) keep each port's
contract, checked on a real redis-server with the same checks as the in-memory twins."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from pipelines.results import Envelope, ResultKey, Status
from tests.support import state_contract as contract
from tests.support.state_contract.common import KEY, OTHER, envelope
from workers.broker.celery_config import base_app
from workers.broker.embedded import Broker
from workers.core import keys
from workers.core.settings import Settings
from workers.files.shared_files import open_shared_files
from workers.runtime.recovery import Recovery, drop_lease, renew_leases
from workers.state.admission import Submission
from workers.state.shared_state import SharedState, broker_client, redis_state

pytestmark = pytest.mark.integration


def _settings(root: Path) -> Settings:
    return Settings.from_env({"MCP_MEDIA_HOME": str(root)})


@pytest.fixture
def client(broker: Broker, tmp_path: Path) -> redis.Redis[bytes]:
    """A client of the test broker, flushed: what the state's own clients see."""
    found = broker_client(_settings(tmp_path), broker.url)
    found.flushall()
    return found


def _state(client: redis.Redis[bytes], root: Path) -> SharedState:
    settings = _settings(root)
    return redis_state(client, settings.sidecars(), settings.jobs.result_ttl)


@pytest.fixture
def harness(client: redis.Redis[bytes], broker: Broker) -> contract.Harness:
    def make(root: Path) -> SharedState:  # a client per state, as each process has its own
        return _state(broker_client(_settings(root), broker.url), root)

    def announce(state: SharedState, name: str, announcement: dict[str, Any]) -> None:
        client.hset(keys.WORKERS, name, json.dumps(announcement))  # as a heartbeat writes it

    def enqueue(state: SharedState, queue: str, count: int) -> None:
        client.rpush(queue, *[b"{}"] * count)  # messages no worker took

    def expire_entries(state: SharedState) -> None:
        for key in client.scan_iter(match=f"{keys.PREFIX}:result:*"):
            client.expire(key, 0)

    return contract.Harness(make, time.sleep, announce, enqueue, expire_entries)


@pytest.mark.parametrize(
    ("port", "check"), contract.CHECKS, ids=lambda c: getattr(c, "__name__", c)
)
def test_contract(
    port: str, check: contract.Check, harness: contract.Harness, tmp_path: Path
) -> None:
    check(harness, tmp_path)


def test_flushed_index_is_rebuilt_from_sidecars(client: redis.Redis[bytes], tmp_path: Path) -> None:
    results = _state(client, tmp_path).results
    results.put(envelope())
    client.flushall()
    assert results.get(KEY) == results.sidecars.read(KEY)
    assert client.exists(keys.result(KEY))  # re-indexed on the way


def test_leases_renew_and_drop(client: redis.Redis[bytes]) -> None:
    renew_leases(client, ["a", "b"], lease=60)
    assert {m.decode() for m in client.zrange(keys.LEASES, 0, -1)} == {"a", "b"}
    drop_lease(client, "a")
    assert [m.decode() for m in client.zrange(keys.LEASES, 0, -1)] == ["b"]


def test_reap_resends_only_unfinished_jobs_of_expired_leases(
    client: redis.Redis[bytes], tmp_path: Path, broker: Broker
) -> None:
    state = _state(client, tmp_path)
    journal = open_shared_files(_settings(tmp_path)).journal
    app = base_app(_settings(tmp_path), broker.url)
    recovery = Recovery(app, client, state, journal)
    finished = envelope(OTHER, job_id="finished")
    state.results.put(finished)
    for job_id, key in (("orphan", KEY), ("finished", OTHER)):
        kwargs: dict[str, Any] = {"key": str(key), "path": "/x", "trace_id": None, "params": {}}
        record = {"task": "mcp_media.summarize_image", "kwargs": kwargs, "queue": "vision"}
        state.records.record_job(job_id, {**record, "soft": 10, "hard": 20}, 600)
    renew_leases(client, ["orphan", "finished"], lease=-1)  # both holders stopped
    renew_leases(client, ["alive"], lease=60)
    try:
        assert recovery.reap(settle=0) == ["orphan"]
        assert client.llen("vision") == 1  # the orphan, re-sent with its own id
        message = json.loads(client.lindex("vision", 0) or b"{}")
        assert message["headers"]["id"] == "orphan"
        assert [m.decode() for m in client.zrange(keys.LEASES, 0, -1)] == ["alive"]
        # taken atomically: one reaper re-sends a job once
        assert recovery.reap(settle=0) == []
        # the re-sent job is in flight again, as admission left it
        assert state.admission.inflight_job(KEY) == "orphan"
        assert state.results.key_for_job("orphan") == KEY
    finally:
        app.close()


def test_a_claim_is_never_taken_over_by_the_pid_its_token_names(
    client: redis.Redis[bytes], tmp_path: Path
) -> None:
    """Two workers with one host name in different PID namespaces: a token naming a pid that
    is dead *here* may belong to a live process elsewhere. Only the TTL ends a claim."""
    claims = _state(client, tmp_path).claims
    dead_here = max(os.getpid() * 7 % 4_000_000, 300_000)  # no such process on this host
    with pytest.raises(ProcessLookupError):
        os.kill(dead_here, 0)
    held = f"{socket.gethostname()}:{dead_here}:0123456789abcdef"
    client.set(keys.claim(KEY), held, px=30_000)
    assert claims.claim(KEY, ttl=30) is None
    assert client.get(keys.claim(KEY)) == held.encode()


@pytest.mark.parametrize(
    ("before", "after"),
    [(Status.FAILED, Status.DONE), (Status.DONE, Status.DONE), (Status.DEGRADED, Status.FAILED)],
)
def test_a_key_restored_after_its_index_entry_expired_is_counted_once(
    client: redis.Redis[bytes], tmp_path: Path, before: Status, after: Status
) -> None:
    """The counters last longer than a result's index entry (`JOBS__RESULT_TTL`): a key
    stored again after its entry expired (reprocessed, retried) moves from where it stood."""
    state = _state(client, tmp_path)
    state.results.put(envelope(status=before, job_id="first"))
    state.results.put(envelope(OTHER, status=Status.FAILED, job_id="other"))
    assert client.expire(keys.result(KEY), 0)  # the index entry's TTL ran out
    assert not client.exists(keys.result(KEY))
    state.results.put(envelope(status=after, job_id="again"))
    assert state.status.counts(KEY.capability.value) == {after.value: 1}
    assert state.status.counts(OTHER.capability.value) == {"failed": 1}


# The previous version's script, verbatim: it kept one `keys.counted` field per key stored.
PREVIOUS_INDEX_COUNTED = """
local was = redis.call('hget', KEYS[3], ARGV[4])
if not was then
  local old = redis.call('get', KEYS[1])
  if old then
    local ok, status = pcall(function() return cjson.decode(old)['status'] end)
    if ok and type(status) == 'string' then was = status end
  end
end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('hset', KEYS[3], ARGV[4], ARGV[3])
if was == ARGV[3] then return 0 end
if was and tonumber(redis.call('hget', KEYS[2], was) or '0') > 0 then
  redis.call('hincrby', KEYS[2], was, -1)
end
redis.call('hincrby', KEYS[2], ARGV[3], 1)
return 1
"""


def _put_as_before(client: redis.Redis[bytes], state: SharedState, stored: Envelope) -> None:
    """What the previous version's results port did: the sidecar, then its script."""
    state.results.sidecars.write(stored)
    capability = stored.key.capability.value
    client.register_script(PREVIOUS_INDEX_COUNTED)(
        keys=[keys.result(stored.key), keys.counts(capability), keys.counted(capability)],
        args=[json.dumps(stored.to_json()), 3600, stored.status.value, str(stored.key)],
    )


@pytest.mark.parametrize("entry", ["alive", "expired", "expired, no sidecar"])
def test_keys_counted_by_the_previous_version_move_from_its_marks(
    client: redis.Redis[bytes], tmp_path: Path, entry: str
) -> None:
    """The previous version's per-key marks still say where a key stood; each is taken as
    its key is stored again, so the hash only shrinks."""
    state = _state(client, tmp_path)
    capability = KEY.capability.value
    _put_as_before(client, state, envelope(status=Status.FAILED, job_id="first"))
    _put_as_before(client, state, envelope(OTHER, status=Status.FAILED, job_id="other"))
    assert client.hget(keys.counted(capability), str(KEY)) == b"failed"
    if entry != "alive":
        client.delete(keys.result(KEY))
    if entry == "expired, no sidecar":
        state.results.sidecars.path(KEY).unlink()  # type: ignore[attr-defined]
    state.results.put(envelope(status=Status.DONE, job_id="retried"))
    assert state.status.counts(capability) == {"done": 1}
    assert not client.hexists(keys.counted(capability), str(KEY))  # taken
    assert client.hget(keys.counted(OTHER.capability.value), str(OTHER)) == b"failed"


def test_a_key_counted_before_its_status_was_kept_moves_from_its_index_entry(
    client: redis.Redis[bytes], tmp_path: Path
) -> None:
    """Counters written by a version that kept no `keys.counted` field: the index entry still
    says where the key stands."""
    state = _state(client, tmp_path)
    _put_as_before(client, state, envelope(status=Status.FAILED, job_id="first"))
    capability = KEY.capability.value
    assert client.hdel(keys.counted(capability), str(KEY)) == 1
    state.results.sidecars.path(KEY).unlink()  # type: ignore[attr-defined]
    state.results.put(envelope(status=Status.DONE, job_id="retried"))
    assert state.status.counts(capability) == {"done": 1}


def test_nothing_is_kept_per_key_once_its_index_entry_expires(
    client: redis.Redis[bytes], tmp_path: Path
) -> None:
    """The counters keep no mark per key: once every key that expires has (the index
    entries, their `latest` and job pointers), what is left is the same for 250 keys as
    for 600, and every key is still counted once when it is stored again."""
    state = _state(client, tmp_path)
    left: dict[int, tuple[set[bytes], int]] = {}
    for stored in (250, 600):
        client.flushall()
        for n in range(stored):
            key = ResultKey(KEY.capability, KEY.version, f"{n:064x}")
            state.results.put(envelope(key, status=Status.FAILED, job_id=f"j{n}"))
        for name in list(client.scan_iter(match="*")):
            if client.ttl(name) > 0:
                client.delete(name)  # as its TTL would
        remaining = set(client.scan_iter(match="*"))
        left[stored] = (remaining, sum(client.memory_usage(name) or 0 for name in remaining))
        for n in range(stored):
            key = ResultKey(KEY.capability, KEY.version, f"{n:064x}")
            state.results.put(envelope(key, status=Status.DONE, job_id=f"again{n}"))
        assert state.status.counts(KEY.capability.value) == {"done": stored}
    assert (
        left[250][0]
        == left[600][0]
        == {
            keys.counts(KEY.capability.value).encode(),
            keys.RECENT.encode(),
        }
    )
    assert not client.exists(keys.counted(KEY.capability.value))
    assert abs(left[600][1] - left[250][1]) < 1_000  # the recent list holds 200 either way


def test_a_result_is_stored_announced_and_admission_moved_in_one_pipeline(
    client: redis.Redis[bytes], tmp_path: Path
) -> None:
    """A put leaves the sidecar and the index entry, and by the time its event arrives the
    key's in-flight entry is gone and its job has left the running set (one transaction)."""
    state = _state(client, tmp_path)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(keys.EVENTS)
    state.admission.admit(Submission(KEY, "j1", 60, "vision"))
    state.admission.started("vision", "j1")
    seen: dict[str, Any] = {}

    def on_event(message: dict[str, Any]) -> None:  # what a waiter sees when the event arrives
        seen["sidecar"] = state.results.sidecars.read(KEY) is not None
        seen["indexed"] = bool(client.exists(keys.result(KEY)))
        seen["inflight"] = bool(client.exists(keys.inflight(KEY)))
        seen["running"] = client.zscore(keys.running("vision"), "j1")
        seen["event"] = Envelope.from_json(json.loads(message["data"])).job_id

    state.results.put(envelope())
    deadline = time.monotonic() + 10
    while "event" not in seen and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=1.0)
        if message is not None:
            on_event(message)
    pubsub.close()
    assert seen == {
        "sidecar": True,
        "indexed": True,
        "inflight": False,
        "running": None,
        "event": "j1",
    }
