"""The workers' announcements as the light core reads them: who serves which queue."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Cluster
from workers import keys

pytestmark = pytest.mark.integration


def test_stale_announcements_are_not_live_workers(cluster: Cluster) -> None:
    client = cluster.client()
    try:
        now = client.store.now()
        for name, seen in (("gone@x", now - 60), ("fresh@x", now - 1)):
            entry = {"name": name, "queues": ["stt"], "pool": "prefork", "seen": seen}
            client.store.redis.hset(keys.WORKERS, name, json.dumps(entry))
        assert [w.name for w in client.store.live_workers()] == ["fresh@x"]
        assert [w.name for w in client.store.serving("stt")] == ["fresh@x"]
        assert client.store.serving("vision") == []
        assert [w.name for w in client.store.live_workers(max_age=120)] == ["fresh@x", "gone@x"]
    finally:
        client.close()
    status = cluster.cli_json("status")
    assert [w["name"] for w in status["workers"]] == ["fresh@x"]
