"""The job journal and its sweep: a submitted job whose message vanished (popped by a worker
that never recorded it, or dropped with Redis' last writes) is re-sent, never left absent.

Real redis-server; the sweep is called directly (grace 0) or, in the last test, by a real
worker's heartbeat.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from tests.integration.conftest import Cluster
from tests.integration.test_vision_jobs import noisy_png
from workers.core import keys
from workers.files.journal import Journal
from workers.gateways.cluster import MediaClient
from workers.runtime.recovery import (
    START_GRACE,
    Recovery,
    broker_settled,
    held_jobs,
    renew_leases,
)

pytestmark = pytest.mark.integration


def recovery(client: MediaClient) -> Recovery:
    """What a worker's heartbeat re-sends jobs with, on this client's broker and files."""
    return Recovery(client.app, client.redis, client.state, client.journal)


def lost_submission(client: MediaClient, tmp_path: Path, seed: int) -> tuple[str, ResultKey]:
    """Everything a submission writes except the message itself, which is then gone."""
    stored = client.settings.media_cache().store_file(
        noisy_png(tmp_path / f"lost{seed}.png", seed), MediaKind.IMAGE
    )
    handle = client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
    assert client.redis.lrem("vision", 0, _message(client, handle.id)) == 1
    return handle.id, handle.key


def _message(client: MediaClient, job_id: str) -> bytes:
    for raw in client.redis.lrange("vision", 0, -1):
        if json.loads(raw)["headers"]["id"] == job_id:
            return raw
    raise AssertionError(f"no message for {job_id}")


def queued_ids(client: MediaClient) -> list[str]:
    return [json.loads(raw)["headers"]["id"] for raw in client.redis.lrange("vision", 0, -1)]


def test_submission_is_journalled_on_disk_before_it_is_sent(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client()
    try:
        job_id, key = lost_submission(client, tmp_path, 1)
        body = client.journal.get(job_id)
    finally:
        client.close()
    assert body is not None
    assert body["kwargs"]["key"] == str(key)
    assert (cluster.home / "jobs" / f"{job_id}.json").is_file()


def test_sweep_resends_a_job_nobody_holds_and_nothing_queues(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client()
    try:
        job_id, _ = lost_submission(client, tmp_path, 2)
        assert recovery(client).sweep(grace=60, settle=0) == []  # still within its grace
        assert recovery(client).sweep(grace=0, settle=0) == [job_id]
        assert queued_ids(client) == [job_id]
        # Queued now: a second sweep leaves it alone.
        assert recovery(client).sweep(grace=0, settle=0) == []
    finally:
        client.close()


def test_sweep_leaves_leased_jobs_alone_and_drops_finished_ones(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client()
    try:
        leased, _ = lost_submission(client, tmp_path, 3)
        renew_leases(client.redis, [leased])
        finished, key = lost_submission(client, tmp_path, 4)
        client.state.results.put(
            Envelope(Status.DONE, key, {"summary": "x"}, job_id=finished, attempts=1)
        )
        assert recovery(client).sweep(grace=0, settle=0) == []
        journal = client.journal
        assert journal.get(finished) is None
        assert journal.get(leased) is not None
        # The lease runs out (its worker died): now it is re-sent.
        client.redis.zadd(keys.LEASES, {leased: time.time() - 1})
        assert recovery(client).sweep(grace=0, settle=0) == [leased]
    finally:
        client.close()


def test_a_later_forced_jobs_result_answers_an_earlier_forced_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Two `reprocess --all` runs force the same key twice: the second job's result, started
    after the first job was submitted, answers both; a result from before a forced job
    answers it not (it asked for a new one)."""
    client = cluster.client()
    stored = client.settings.media_cache().store_file(
        noisy_png(tmp_path / "forced.png", 7), MediaKind.IMAGE
    )

    def forced() -> str:
        handle = client.submit_one(
            Capability.VISION_SUMMARIZE,
            stored.sha256,
            stored.path,
            force=True,
            params={"force": True},
        )
        client.redis.lrem("vision", 0, _message(client, handle.id))
        return handle.id

    try:
        first = forced()
        key = ResultKey.parse(client.journal.get(first)["kwargs"]["key"])  # type: ignore[index]
        done = Envelope(Status.DONE, key, {"summary": "x"}, job_id=first, started_at=time.time())
        client.state.results.put(done)  # the first run's job ends: its key is free again
        second = forced()
        assert second != first
        later = Envelope(Status.DONE, key, {"summary": "y"}, job_id=second, started_at=time.time())
        client.state.results.put(later)  # the second run's result replaces the first's
        assert recovery(client).sweep(grace=0, settle=0) == []
        assert client.journal.get(first) is None and client.journal.get(second) is None
        # A third forced job: the result it finds started before it was submitted.
        time.sleep(0.01)
        third = forced()
        assert recovery(client).sweep(grace=0, settle=0) == [third]
    finally:
        client.close()


def test_a_failed_send_leaves_nothing_to_resend(cluster: Cluster, tmp_path: Path) -> None:
    client = cluster.client()
    stored = client.settings.media_cache().store_file(
        noisy_png(tmp_path / "x.png", 5), MediaKind.IMAGE
    )

    def refuse(*_: object, **__: object) -> None:
        raise ConnectionError("broker gone")

    client.app.send_task = refuse
    try:
        with pytest.raises(ConnectionError):
            client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
        assert list(client.journal.entries()) == []
    finally:
        client.close()


def test_worker_heartbeat_brings_back_a_vanished_message(cluster: Cluster, tmp_path: Path) -> None:
    client = cluster.client()
    try:
        job_id, key = lost_submission(client, tmp_path, 6)
        cluster.start_worker("vision", concurrency=2)
        started = time.monotonic()
        (handle,) = client.wait(
            [client.submit_one(Capability.VISION_SUMMARIZE, key.sha256, tmp_path)], timeout=90
        )
    finally:
        client.close()
    assert handle.id == job_id  # the same job, not a new submission
    assert handle.status is Status.DONE, handle
    assert handle.envelope is not None and handle.envelope.job_id == job_id
    assert "re-sent job " + job_id in cluster.workers[0].text()
    assert time.monotonic() - started < 90


def test_journal_refuses_paths_as_job_ids(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "jobs")
    for bad in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(ValueError):
            journal.add(bad, {})
    journal.add(str(uuid.uuid4()), {"queue": "vision"})
    assert len(list(journal.entries())) == 1


def test_no_lease_is_reaped_before_the_broker_was_up_for_a_whole_lease(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Leases expire during a broker outage because nobody can renew them: right after a
    restart they are no evidence of a dead worker, and reaping would run jobs twice."""
    client = cluster.client()
    try:
        job_id, _ = lost_submission(client, tmp_path, 7)
        client.redis.zadd(keys.LEASES, {job_id: time.time() - 1})
        assert not broker_settled(client.redis, settle=10**9)
        assert recovery(client).reap(settle=10**9) == []
        assert recovery(client).sweep(grace=0, settle=10**9) == []
        assert queued_ids(client) == []
        assert recovery(client).reap(settle=0) == [job_id]
        assert queued_ids(client) == [job_id]
    finally:
        client.close()


class _Request:
    def __init__(self, job_id: str, key: ResultKey, time_start: float | None) -> None:
        self.id = job_id
        self.kwargs = {"key": str(key)}
        self.time_start = time_start


def test_a_request_that_ended_is_not_held_even_if_celery_still_lists_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    """After a connection loss Celery's active set can keep a request that already ended; a
    started request is held only while its key's claim lives."""
    client = cluster.client()
    try:
        now = time.time()
        key = client.key(Capability.VISION_SUMMARIZE, "ab" * 32)
        waiting = _Request("waiting", key, None)
        fresh = _Request("fresh", key, now - 1)
        ended = _Request("ended", key, now - START_GRACE - 5)
        assert held_jobs(client.redis, [waiting], [fresh, ended], now) == [
            "waiting",
            "fresh",
        ]
        claim = client.state.claims.claim(key, ttl=30)
        assert claim is not None
        assert held_jobs(client.redis, [waiting], [fresh, ended], now) == [
            "waiting",
            "fresh",
            "ended",
        ]
    finally:
        client.close()
