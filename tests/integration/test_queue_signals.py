"""What autoscalers read of each lane (`ClusterView.queue_signals`, `/metrics`), against a
real redis-server and real worker processes: messages in every priority list, the ones a
worker holds, the age of the oldest admitted job, a paused queue's backlog, the batch lane
apart from the live one."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from redis import Redis

from pipelines.media import Capability, MediaKind
from pipelines.results import Status
from tests.integration.conftest import Cluster
from tests.support.browser import wait_until
from tests.support.factories import noisy_png
from tests.support.fake_openai import Mode
from tests.support.serve import serve
from workers.broker.message_keys import MessageKeys
from workers.core.capabilities import CAPABILITIES, Lane
from workers.core.cluster_view import QueueSignals
from workers.gateways.cluster import JobHandle, MediaClient
from workers.gateways.operations import ClusterOperations

pytestmark = pytest.mark.integration

VISION = CAPABILITIES[Capability.VISION_SUMMARIZE]
LIVE, BATCH = VISION.lane_queue(Lane.LIVE), VISION.lane_queue(Lane.BATCH)
NOBODY_RUNS = "mcp_media.tests.nobody_runs_this"  # a task name no worker has


def cache_image(cluster: Cluster, seed: int) -> Path:
    stored = (
        cluster.settings().media_cache().store_bytes(noisy_png(seed, (48, 32)), MediaKind.IMAGE)
    )
    return stored.path


def submit(client: MediaClient, seed: int, cluster: Cluster) -> JobHandle:
    path = cache_image(cluster, seed)
    return client.submit_one(Capability.VISION_SUMMARIZE, path.name.split(".")[0], path)


def gauge(text: str, name: str, queue: str) -> float:
    lane = "batch" if queue.endswith(".batch") else "live"
    labels = f'capability="vision.summarize",lane="{lane}",queue="{queue}"'
    found = re.search(rf"^mcp_media_queue_{name}{{{re.escape(labels)}}} (\S+)$", text, re.M)
    assert found, (name, queue, text[:2000])
    return float(found.group(1))


def test_messages_of_every_priority_are_waiting_and_the_batch_lane_is_apart(
    cluster: Cluster,
) -> None:
    client = cluster.client()
    try:
        keys = MessageKeys()
        for priority in (0, 4, 9):
            client.app.send_task(NOBODY_RUNS, queue=LIVE, priority=priority)
        client.app.send_task(NOBODY_RUNS, queue=BATCH, priority=0)
        redis = Redis.from_url(cluster.broker.url)
        lengths = {name: redis.llen(name) for name in keys.lists(LIVE)}
        # kombu put them in three different lists: LLEN of the queue's name sees one of them
        assert sorted(lengths.values()) == [0, 1, 1, 1] and redis.llen(LIVE) == 1
        redis.close()
        signals = client.state.view.queue_signals([LIVE, BATCH])
        assert signals[LIVE].waiting == 3 and signals[BATCH].waiting == 1
        assert signals[LIVE].reserved == 0 and signals[LIVE].running == 0
        assert client.state.view.queue_lengths([LIVE, BATCH]) == {LIVE: 3, BATCH: 1}
    finally:
        client.close()


def test_the_oldest_admitted_job_ages_by_the_brokers_clock(cluster: Cluster) -> None:
    client = cluster.client()
    view = client.state.view
    try:
        before = view.now()
        submit(client, 1, cluster)  # admitted by the broker's clock, after `before`
        first = view.queue_signals([LIVE])[LIVE]
        read = view.now()
        assert first.waiting == 1
        assert 0.0 < first.oldest_waiting_s <= read - before
        wait_until("the broker's clock to move on", lambda: view.now() > read)
        later = view.queue_signals([LIVE])[LIVE]
        assert later.oldest_waiting_s > first.oldest_waiting_s
        assert view.queue_signals([BATCH])[BATCH].oldest_waiting_s == 0.0
    finally:
        client.close()


def test_a_job_a_worker_holds_is_reserved_and_running_then_neither(cluster: Cluster) -> None:
    cluster.fake.set(mode=Mode.SLOW, delay=15.0)
    cluster.start_worker("vision", concurrency=1)
    client = cluster.client()
    view = client.state.view

    def live_if(wanted: Callable[[QueueSignals], bool]) -> QueueSignals | None:
        signals = view.queue_signals([LIVE])[LIVE]
        return signals if wanted(signals) else None

    try:
        handle = submit(client, 2, cluster)
        held = wait_until("the worker to hold the job", lambda: live_if(lambda s: s.running == 1))
        assert held.reserved == 1 and held.waiting == 0 and held.oldest_waiting_s == 0.0
        # The batch lane holds no message of it, but shares the capability's running jobs.
        batch = view.queue_signals([BATCH])[BATCH]
        assert batch.reserved == 0 and batch.running == 1
        cluster.fake.set(mode=Mode.OK)
        (done,) = client.wait([handle], timeout=120)
        assert done.status is Status.DONE
        after = wait_until("the message's ack", lambda: live_if(lambda s: s.reserved == 0))
        assert after.running == 0 and after.waiting == 0 and after.service_s > 0
    finally:
        client.close()


def test_a_paused_queues_backlog_is_counted_and_shown_on_metrics(cluster: Cluster) -> None:
    client = cluster.client()
    view = client.state.view
    try:
        client.state.coordination.set_paused(LIVE, True)
        cluster.start_worker("vision", concurrency=2)
        wait_until(
            "the worker to announce vision as paused",
            lambda: [w for w in view.live_workers() if LIVE in w.paused],
        )
        handles = [submit(client, seed, cluster) for seed in (3, 4, 5)]
        with serve(cluster) as served:
            auth = {"Authorization": f"Bearer {served.key}"}
            text = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=30).text
        assert gauge(text, "waiting", LIVE) == 3
        assert gauge(text, "paused", LIVE) == 1
        assert gauge(text, "workers", LIVE) == 0  # paused: it takes none
        assert gauge(text, "oldest_waiting_seconds", LIVE) > 0
        assert gauge(text, "waiting", BATCH) == 0
        assert 'mcp_media_queue_depth{queue="vision"} 3.0' in text
        ClusterOperations(client).set_paused(LIVE, False)
        finished = client.wait(handles, timeout=120)
        assert [h.status for h in finished] == [Status.DONE] * 3
        assert view.queue_signals([LIVE])[LIVE].waiting == 0
    finally:
        client.close()
