"""The cluster's job gateway on a real redis-server and real worker processes: one atomic
admission per key, and waits matched to the job they were handed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import redis

from pipelines import ingest
from pipelines.media import Capability
from pipelines.results import Envelope, Status
from tests.integration.conftest import Cluster
from tests.integration.test_vision_jobs import image_result
from workers.core import keys
from workers.core.capabilities import CAPABILITIES
from workers.core.gateway import Admission, JobHandle, QueueFull

pytestmark = pytest.mark.integration

VISION = Capability.VISION_SUMMARIZE


def cached_images(cluster: Cluster, tmp_path: Path, count: int) -> list[tuple[str, Path]]:
    result = image_result(tmp_path, list(range(count)))
    rendered = ingest(result.read_text(), cache=cluster.settings().media_cache())
    assert len(rendered.media) == count
    return [(blob.sha256, blob.path) for blob in rendered.media]


def test_a_burst_of_distinct_submissions_queues_no_more_than_the_high_water(
    cluster: Cluster, tmp_path: Path
) -> None:
    """32 submitters at once, high water 3, no worker: the check and the enqueue are one step,
    so no submitter passes a check that another one's job makes false."""
    images = cached_images(cluster, tmp_path, 32)
    client = cluster.client(MCP_MEDIA_JOBS__HIGH_WATER="3")
    barrier = threading.Barrier(len(images))
    queued: list[JobHandle] = []
    refused: list[QueueFull] = []

    def submit(sha: str, path: Path) -> None:
        barrier.wait()
        try:
            queued.append(client.submit_one(VISION, sha, path, limit=True))
        except QueueFull as exc:
            refused.append(exc)

    threads = [threading.Thread(target=submit, args=image) for image in images]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(queued) == 3 and len(refused) == 29
        assert all(h.admission is Admission.QUEUED for h in queued)
        assert "high water 3" in str(refused[0])
        assert client.waiting()["vision"] == 3  # what Celery's queue really holds
    finally:
        client.close()


def test_a_failed_key_submitted_again_waits_for_its_new_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    ((sha, path),) = cached_images(cluster, tmp_path, 1)
    cluster.fake.set(reply="A noisy test pattern.", latency=0.5)
    client = cluster.client()
    try:
        key = client.key(VISION, sha)
        client.state.results.put(Envelope(Status.FAILED, key, {}, job_id="old", reason="boom"))
        cluster.start_worker("vision")
        handle = client.submit_one(VISION, sha, path)
        assert handle.admission is Admission.QUEUED and handle.id != "old"
        (done,) = client.wait([handle], 60)
        assert done.envelope is not None and done.envelope.job_id == handle.id
        assert done.status is Status.DONE
        assert done.envelope.output["summary"] == "A noisy test pattern."
        again = client.submit_one(VISION, sha, path)
        assert again.admission is Admission.SETTLED and again.envelope == done.envelope
    finally:
        client.close()


def test_joined_submitters_share_one_job_and_one_run(cluster: Cluster, tmp_path: Path) -> None:
    ((sha, path),) = cached_images(cluster, tmp_path, 1)
    cluster.fake.set(reply="One run.", latency=1.0)
    cluster.start_worker("vision")
    first, second = cluster.client(), cluster.client()
    try:
        a = first.submit_one(VISION, sha, path)
        b = second.submit_one(VISION, sha, path)
        assert b.admission is Admission.JOINED and b.id == a.id
        (done_a,) = first.wait([a], 60)
        (done_b,) = second.wait([b], 60)
        assert done_a.envelope == done_b.envelope and done_a.status is Status.DONE
        assert cluster.fake.request_count == 1
    finally:
        first.close()
        second.close()


def test_a_producer_with_other_settings_keys_jobs_by_what_the_workers_run(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The producer's own vision settings differ from the worker's: its jobs are keyed by the
    version the live worker announces, so they run instead of failing as a mismatch."""
    ((sha, path),) = cached_images(cluster, tmp_path, 1)
    cluster.fake.set(reply="Keyed by the worker.")
    cluster.start_worker("vision")
    client = cluster.client(MCP_MEDIA_VISION__PROMPT="a prompt no worker was given")
    try:
        workers_run = CAPABILITIES[VISION].version(cluster.settings())
        assert CAPABILITIES[VISION].version(client.settings) != workers_run
        handle = client.submit_one(VISION, sha, path)
        assert handle.key.version == workers_run
        (done,) = client.wait([handle], 60)
        assert done.status is Status.DONE, done.envelope
        (worker,) = client.state.view.serving("vision")
        assert worker.versions[VISION.value] == {"version": workers_run}
    finally:
        client.close()


def test_the_events_follower_skips_malformed_events_and_keeps_dispatching(
    cluster: Cluster, tmp_path: Path
) -> None:
    ((sha, _path),) = cached_images(cluster, tmp_path, 1)
    client = cluster.client()
    try:
        key = client.key(VISION, sha)
        got: list[Envelope] = []
        everything: list[Envelope] = []
        cancel = client.events.watch(key, got.append)
        stop_all = client.events.watch_all(everything.append)
        raw = redis.Redis.from_url(cluster.broker.url)
        raw.publish(keys.EVENTS, b"not json")
        raw.publish(keys.EVENTS, json.dumps({"status": "done"}))  # no key: not an envelope
        raw.close()
        stored = Envelope(Status.DONE, key, {"summary": "after the noise"}, job_id="j1")
        client.state.results.put(stored)
        deadline = time.monotonic() + 30
        while not (got and everything) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got == [stored] and everything == [stored]
        cancel()
        stop_all()
        client.state.results.put(Envelope(Status.DONE, key, {"summary": "again"}, job_id="j2"))
        # Cancelled watches hear nothing more. A fresh watcher proves the follower has
        # dispatched past "again" (j2 may reach it too: it was on its way when it watched).
        later: list[Envelope] = []
        client.events.watch_all(later.append)
        client.state.results.put(Envelope(Status.DONE, key, {"summary": "third"}, job_id="j3"))
        deadline = time.monotonic() + 30
        while "j3" not in [e.job_id for e in later] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "j3" in [e.job_id for e in later]
        assert got == [stored] and everything == [stored]
    finally:
        client.close()
