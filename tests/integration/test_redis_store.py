"""The Redis result store (its Lua scripts included) keeps the `ResultStore` contract,
checked on a real redis-server with the same checks as the in-memory twin."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from pipelines.results import Status
from tests.support import store_contract as contract
from workers.broker.celery_config import base_app
from workers.broker.embedded import Broker
from workers.core import keys
from workers.core.settings import Settings
from workers.runtime.recovery import drop_lease, reap, renew_leases
from workers.state.store import RedisStore, redis_store

pytestmark = pytest.mark.integration


@pytest.fixture
def make(broker: Broker) -> contract.MakeStore:
    flush = redis.Redis.from_url(broker.url)
    flush.flushall()
    flush.close()

    def build(root: Path) -> RedisStore:
        return redis_store(Settings.from_env({"MCP_MEDIA_HOME": str(root)}), broker.url)

    return build


@pytest.mark.parametrize("check", contract.CHECKS, ids=lambda c: c.__name__)
def test_contract(check: contract.Check, make: contract.MakeStore, tmp_path: Path) -> None:
    check(make, tmp_path)


@pytest.mark.parametrize("check", contract.TIMED_CHECKS, ids=lambda c: c.__name__)
def test_contract_with_expiry(
    check: contract.TimedCheck, make: contract.MakeStore, tmp_path: Path
) -> None:
    check(make, tmp_path, time.sleep)


def test_flushed_index_is_rebuilt_from_sidecars(make: contract.MakeStore, tmp_path: Path) -> None:
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    store.put(contract.envelope())
    store.redis.flushall()
    assert store.get(contract.KEY) == store.sidecars.read(contract.KEY)
    assert store.redis.exists(keys.result(contract.KEY))  # re-indexed on the way


def test_leases_renew_and_drop(make: contract.MakeStore, tmp_path: Path) -> None:
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    renew_leases(store.redis, ["a", "b"], lease=60)
    assert {m.decode() for m in store.redis.zrange(keys.LEASES, 0, -1)} == {"a", "b"}
    drop_lease(store.redis, "a")
    assert [m.decode() for m in store.redis.zrange(keys.LEASES, 0, -1)] == ["b"]


def test_reap_resends_only_unfinished_jobs_of_expired_leases(
    make: contract.MakeStore, tmp_path: Path, broker: Broker
) -> None:
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    app = base_app(Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path)}), broker.url)
    finished = contract.envelope(contract.OTHER, job_id="finished")
    store.put(finished)
    for job_id, key in (("orphan", contract.KEY), ("finished", contract.OTHER)):
        kwargs: dict[str, Any] = {"key": str(key), "path": "/x", "trace_id": None, "params": {}}
        record = {"task": "mcp_media.summarize_image", "kwargs": kwargs, "queue": "vision"}
        store.record_job(job_id, {**record, "soft": 10, "hard": 20}, 600)
    renew_leases(store.redis, ["orphan", "finished"], lease=-1)  # both holders stopped
    renew_leases(store.redis, ["alive"], lease=60)
    try:
        assert reap(app, store, settle=0) == ["orphan"]
        assert store.redis.llen("vision") == 1  # the orphan, re-sent with its own id
        message = json.loads(store.redis.lindex("vision", 0) or b"{}")
        assert message["headers"]["id"] == "orphan"
        assert [m.decode() for m in store.redis.zrange(keys.LEASES, 0, -1)] == ["alive"]
        assert reap(app, store, settle=0) == []  # taken atomically: one reaper re-sends a job once
    finally:
        app.close()


def test_a_claim_is_never_taken_over_by_the_pid_its_token_names(
    make: contract.MakeStore, tmp_path: Path
) -> None:
    """Two workers with one host name in different PID namespaces: a token naming a pid that
    is dead *here* may belong to a live process elsewhere. Only the TTL ends a claim."""
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    dead_here = max(os.getpid() * 7 % 4_000_000, 300_000)  # no such process on this host
    with pytest.raises(ProcessLookupError):
        os.kill(dead_here, 0)
    held = f"{socket.gethostname()}:{dead_here}:0123456789abcdef"
    store.redis.set(keys.claim(contract.KEY), held, px=30_000)
    assert store.claim(contract.KEY, ttl=30) is None
    assert store.redis.get(keys.claim(contract.KEY)) == held.encode()


@pytest.mark.parametrize(
    ("before", "after"),
    [(Status.FAILED, Status.DONE), (Status.DONE, Status.DONE), (Status.DEGRADED, Status.FAILED)],
)
def test_a_key_restored_after_its_index_entry_expired_is_counted_once(
    make: contract.MakeStore, tmp_path: Path, before: Status, after: Status
) -> None:
    """The counters last longer than a result's index entry (`JOBS__RESULT_TTL`): a key
    stored again after its entry expired (reprocessed, retried) moves from where it stood."""
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    store.put(contract.envelope(status=before, job_id="first"))
    store.put(contract.envelope(contract.OTHER, status=Status.FAILED, job_id="other"))
    assert store.redis.expire(keys.result(contract.KEY), 0)  # the index entry's TTL ran out
    assert not store.redis.exists(keys.result(contract.KEY))
    store.put(contract.envelope(status=after, job_id="again"))
    assert store.status_counts(contract.KEY.capability.value) == {after.value: 1}
    assert store.status_counts(contract.OTHER.capability.value) == {"failed": 1}


def test_a_key_counted_before_its_status_was_kept_moves_from_its_index_entry(
    make: contract.MakeStore, tmp_path: Path
) -> None:
    """Counters written by a version that kept no `keys.counted` field: the index entry still
    says where the key stands."""
    store = make(tmp_path)
    assert isinstance(store, RedisStore)
    store.put(contract.envelope(status=Status.FAILED, job_id="first"))
    capability = contract.KEY.capability.value
    assert store.redis.hdel(keys.counted(capability), str(contract.KEY)) == 1
    store.put(contract.envelope(status=Status.DONE, job_id="retried"))
    assert store.status_counts(capability) == {"done": 1}
