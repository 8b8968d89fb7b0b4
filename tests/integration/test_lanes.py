"""Live work first on a real cluster: a worker with a batch backlog takes a live job next,
and the backlog still finishes. Order is read from the provider's requests (one per job, in
the order jobs start), never from time."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.results import Status
from tests.faults.scenarios import image_jobs
from tests.integration.conftest import Cluster
from workers.core.capabilities import Lane

pytestmark = pytest.mark.integration

SLOTS = 2
BACKLOG = 40
LIVE_WIDTH = 80  # the live image's width: the batch images are 64 wide


def test_a_live_job_starts_next_while_a_batch_backlog_waits(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.fake.set(latency=0.3)  # each call holds its slot: the backlog stays queued
    cluster.start_worker("vision", concurrency=SLOTS)
    backlog = image_jobs(cluster, tmp_path, range(1000, 1000 + BACKLOG))
    (live,) = image_jobs(cluster, tmp_path, range(2000, 2001), size=(LIVE_WIDTH, 60))
    client = cluster.client()
    try:
        batch = client.submit(backlog, lane=Lane.BATCH)
        for _ in range(2400):  # until the worker is busy with batch work (a hang guard)
            if cluster.fake.request_count >= SLOTS:
                break
            cluster.fake.wait(0.05)
        before = cluster.fake.request_count  # batch jobs started before the live one was sent
        (handle,) = client.wait(client.submit([live]), 60)
        assert handle.status is Status.DONE
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
        client.close()
