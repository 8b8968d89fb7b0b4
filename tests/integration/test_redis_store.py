"""The Redis result store (its Lua scripts included) keeps the `ResultStore` contract,
checked on a real redis-server with the same checks as the in-memory twin."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from tests.support import store_contract as contract
from workers import keys
from workers.broker import Broker
from workers.runtime.recovery import drop_lease, renew_leases
from workers.settings import Settings
from workers.store import RedisStore, redis_store

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
