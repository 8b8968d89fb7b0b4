"""Live work first on a real cluster: a worker with a batch backlog takes a live job next,
the backlog still finishes, and batch keeps its floor share (JOBS__BATCH_EVERY, read by the
worker's transport). Order is read from the provider's requests (one per job, in
the order jobs start), never from time."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from pipelines.results import Status
from tests.faults.scenarios import image_jobs
from tests.integration.conftest import Cluster
from workers.core.capabilities import Lane

pytestmark = pytest.mark.integration

SLOTS = 2
BACKLOG = 200  # hundreds of batch jobs wait
LIVE_WIDTH = 80  # the live image's width: the batch images are 64 wide


def test_a_live_job_starts_next_while_a_batch_backlog_waits(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.fake.set(latency=0.1)  # each call holds its slot: the backlog stays queued
    cluster.start_worker("vision", concurrency=SLOTS)
    backlog = image_jobs(cluster, tmp_path, range(1000, 1000 + BACKLOG))
    (live,) = image_jobs(cluster, tmp_path, range(2000, 2001), size=(LIVE_WIDTH, 60))
    client = cluster.client()
    broker = redis.Redis.from_url(cluster.broker.url)
    try:
        batch = client.submit(backlog, lane=Lane.BATCH)
        for _ in range(2400):  # until the worker is busy with batch work (a hang guard)
            if cluster.fake.request_count >= SLOTS:
                break
            cluster.fake.wait(0.05)
        before = cluster.fake.request_count  # batch jobs started before the live one was sent
        (handle,) = client.submit([live])
        held = []  # kombu's unacked: what the worker took; never more than its slots
        for _ in range(600):  # until the live job is done (a hang guard)
            held.append(int(broker.hlen("unacked")))
            (handle,) = client.wait([handle], 0.1)
            if handle.envelope is not None:
                break
        assert handle.status is Status.DONE
        assert max(held) <= SLOTS, held
        widths = [r.image_width for r in cluster.fake.received]
        started_at = widths.index(LIVE_WIDTH)
        # Only the jobs the worker already held (one per slot) or was taking as it was sent
        # started between its send and its start: not the backlog, first in first out.
        assert started_at - before <= SLOTS + 1, (before, started_at)
        assert started_at < BACKLOG // 2
        finished = client.wait(batch, 120)
        assert [h.status for h in finished] == [Status.DONE] * BACKLOG  # the batch still ends
        assert cluster.fake.request_count == BACKLOG + 1
    finally:
        broker.close()
        client.close()


def test_a_live_caller_that_joins_a_waiting_batch_job_is_estimated_by_its_place(
    cluster: Cluster, tmp_path: Path
) -> None:
    # No worker: the jobs wait. The door's caller joins the job reprocess queued for the
    # same content; its estimate is the batch job's, never "started" (waited for to the end).
    jobs = image_jobs(cluster, tmp_path, range(3000, 3003))
    client = cluster.client()
    try:
        batch = client.submit(jobs, lane=Lane.BATCH)
        (joined,) = client.submit(jobs[2:])
        assert joined.id == batch[2].id
        assert client.finish_estimate(joined) is not None
        (live,) = client.submit(image_jobs(cluster, tmp_path, range(3003, 3004)))
        assert client.finish_estimate(live) is not None
        assert client.waiting()["vision.batch"] == 3 and client.waiting()["vision"] == 1
    finally:
        client.close()


def test_batch_keeps_its_floor_share_on_a_real_worker(cluster: Cluster, tmp_path: Path) -> None:
    # One slot: the worker takes one message at a time, in the order its queue cycle asks
    # Redis for them (JOBS__BATCH_EVERY = 4: batch first once in every 4 fetches).
    live = image_jobs(cluster, tmp_path, range(4000, 4012), size=(LIVE_WIDTH, 60))
    batch = image_jobs(cluster, tmp_path, range(4100, 4106))
    client = cluster.client()
    try:
        handles = client.submit(batch, lane=Lane.BATCH) + client.submit(live)
        cluster.start_worker("vision", concurrency=1, MCP_MEDIA_JOBS__BATCH_EVERY="4")
        finished = client.wait(handles, 120)
        assert [h.status for h in finished] == [Status.DONE] * len(handles)
        order = ["live" if r.image_width == LIVE_WIDTH else "batch" for r in cluster.fake.received]
        assert order == (["live"] * 3 + ["batch"]) * 4 + ["batch"] * 2
    finally:
        client.close()
