"""A job's outcome code travels with its result: in the sidecar, in the Redis index and in
the event that announces it, as a real worker process stores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.outcomes import Outcome
from pipelines.results import Status
from tests.faults.scenarios import image_jobs
from tests.support.cluster import Cluster
from workers.core import keys

pytestmark = pytest.mark.integration


def test_the_code_is_in_the_sidecar_the_index_and_the_event(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.fake.set(mode="error", status=400)  # the provider refuses: not worth a retry
    cluster.start_worker("vision")
    client = cluster.client()
    events = client.redis.pubsub()
    try:
        events.subscribe(keys.EVENTS)
        assert events.get_message(timeout=10) is not None  # the subscription is live
        (handle,) = client.wait(client.submit(image_jobs(cluster, tmp_path, range(31, 32))), 60)
        assert handle.envelope is not None and handle.status is Status.DEGRADED
        assert handle.envelope.outcome is Outcome.PROVIDER_REJECTED
        assert handle.envelope.reason is not None  # the words for people stay beside it

        sidecar = cluster.settings().sidecars().path(handle.key)
        stored = json.loads(sidecar.read_text(encoding="utf-8"))
        indexed = json.loads(client.redis.get(keys.result(handle.key)) or b"{}")
        announced = None
        while announced is None:
            message = events.get_message(timeout=10)
            assert message is not None, "no event announced the result"
            if message["type"] == "message":
                body = json.loads(message["data"])
                if body["sha256"] == handle.key.sha256:
                    announced = body
        for found in (stored, indexed, announced):
            assert found["status"] == "degraded"
            assert found["meta"]["outcome"] == "provider_rejected", found
            assert found["meta"]["reason"] == handle.envelope.reason
    finally:
        events.close()
        client.close()
