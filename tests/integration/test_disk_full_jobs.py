"""A job whose result finds no room on the worker's disk ends `failed` with a `disk_full`
reason at its first attempt; it used to be re-sent each time its lease expired, for as long
as the disk stayed full, and never ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.results import Status
from tests.faults.scenarios import image_jobs
from tests.support.cluster import Cluster
from tests.support.disk import fill, on_tmpfs, seen_by

pytestmark = pytest.mark.integration


def test_a_result_that_finds_the_disk_full_fails_the_job_at_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    results = cluster.settings().results_root
    worker = cluster.start_worker("vision", 2, prefix=on_tmpfs(results, 64))
    filler = fill(seen_by(worker.proc.pid, results))
    jobs = image_jobs(cluster, tmp_path, range(7, 8))
    client = cluster.client()
    try:
        (handle,) = client.wait(client.submit(jobs), timeout=120)
    finally:
        client.close()
    assert handle.envelope is not None, worker.text()[-3000:]
    assert handle.status is Status.FAILED
    reason = handle.envelope.reason or ""
    assert reason.startswith("disk_full: no space left on the cache volume"), reason
    assert "No space left on device" in reason  # the words the doors answer 507 for
    assert handle.envelope.attempts == 1
    assert worker.text().count(f"[{handle.id}] received") == 1  # one delivery, no re-send
    assert cluster.fake.request_count == 1  # the stage ran once

    filler.unlink()  # room again: the same input is submitted again and done
    client = cluster.client()
    try:
        (again,) = client.wait(client.submit(jobs), timeout=120)
    finally:
        client.close()
    assert again.status is Status.DONE, again.envelope
