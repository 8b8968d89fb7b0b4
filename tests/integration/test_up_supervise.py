"""`mcp-media up` keeps its processes running: a worker or the broker that dies is started
again while the others keep running, a killed `up` takes its children along, and a worker
rides out a broker that refuses writes or is gone. Real `up`, real redis-server, real
workers (their models from the prepared test home)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipelines.media import Capability, JobRequest
from pipelines.results import Status
from tests.support.cluster import ROOT
from tests.support.fake_openai import FakeOpenAI
from tests.support.misconf import refuse_writes, take_writes
from tests.support.net import free_port
from tests.support.up import Up, alive, descendants, fresh_home, node_env, wait_for
from workers.broker.embedded import Broker, ensure_embedded, running_embedded, stop_embedded
from workers.core.capabilities import QUEUES
from workers.core.settings import Settings
from workers.core.stage_configs import store_request, synthesis_request
from workers.gateways.cluster import MediaClient

pytestmark = pytest.mark.integration

JOB_TIMEOUT = 240.0


@pytest.fixture
def up(tmp_path: Path, models_home: Path, fake_openai: FakeOpenAI) -> Iterator[Up]:
    home = fresh_home(tmp_path, models_home)
    running = Up(home, node_env(home, fake_openai)).start()
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def speak(env: dict[str, str], text: str) -> Status | None:
    """Submit one TTS job through the broker `up` runs now, and wait for its result."""
    broker = wait_for_broker(Path(env["MCP_MEDIA_HOME"]))
    settings = Settings.from_env({**env, "MCP_MEDIA_REDIS_URL": broker.url})
    request = store_request(settings, synthesis_request(text, settings))
    client = MediaClient.connect(settings)
    try:
        job = JobRequest(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
        (handle,) = client.wait(client.submit([job]), JOB_TIMEOUT)
    finally:
        client.close()
    return handle.status


def wait_for_broker(home: Path) -> Broker:
    found: list[Broker] = []

    def up_again() -> bool:
        broker = running_embedded(home)
        if broker is not None:
            found.append(broker)
        return broker is not None

    assert wait_for(up_again, 120), "the broker did not come back"
    return found[-1]


def test_a_killed_worker_is_restarted_and_the_others_keep_running(up: Up) -> None:
    before = up.children()
    assert set(before) == set(QUEUES), before
    os.kill(before["tts"], signal.SIGKILL)
    assert wait_for(lambda: up.restarted("worker tts") is not None, 60), up.text()
    up.wait_ready(("tts",), at_least=2)
    after = up.children()
    assert after["tts"] == up.restarted("worker tts") != before["tts"]
    assert (after["vision"], after["stt"]) == (before["vision"], before["stt"])
    assert "was killed by SIGKILL" in up.text()
    assert "worker-tts.log" in up.text()
    assert speak(up.env, "The worker is back.") is Status.DONE


def test_a_killed_serve_is_restarted_under_up_api(
    tmp_path: Path, models_home: Path, fake_openai: FakeOpenAI
) -> None:
    home = fresh_home(tmp_path, models_home)
    running = Up(home, node_env(home, fake_openai), api_port=free_port()).start()
    try:
        running.wait_ready()
        running.wait_api()
        before = running.children()
        os.kill(before["api"], signal.SIGKILL)
        assert wait_for(lambda: running.restarted("api") is not None, 60), running.text()
        running.wait_api()
        after = running.children()
        assert after["api"] == running.restarted("api") != before["api"]
        assert {q: after[q] for q in ("vision", "stt", "tts")} == {
            q: before[q] for q in ("vision", "stt", "tts")
        }
        assert "serve.log" in running.text()
    finally:
        running.stop()


def test_a_killed_up_takes_every_child_along(up: Up) -> None:
    up.children()  # records every descendant: workers, their pool children
    family = descendants(up.pid)
    assert len(family) >= 4, family  # three workers and at least one pool child
    os.kill(up.pid, signal.SIGKILL)
    assert up.proc is not None
    up.proc.wait(timeout=30)
    assert wait_for(lambda: not any(alive(pid) for pid in family), 60), [
        pid for pid in family if alive(pid)
    ]


@pytest.mark.parametrize("how", ["sigkill", "down"])
def test_the_broker_is_restarted_under_up_and_jobs_flow_again(up: Up, how: str) -> None:
    broker = up.broker()
    assert broker is not None
    workers = up.children()
    if how == "sigkill":
        pid = int((up.home / "redis" / "redis.pid").read_text())
        os.kill(pid, signal.SIGKILL)
    else:
        down = subprocess.run(
            [sys.executable, "-m", "workers.cli.main", "down"],
            env=up.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert down.returncode == 0, down.stderr
    assert wait_for(lambda: "restarted the broker on" in up.text(), 60), up.text()
    again = wait_for_broker(up.home)
    assert again.url == broker.url
    assert up.children() == workers  # nobody else was restarted
    assert speak(up.env, "The broker is back.") is Status.DONE


def start_worker(
    home: Path, env: dict[str, str], queues: str = "vision"
) -> subprocess.Popen[bytes]:
    log = home / "worker.log"
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "worker", "--queues", queues],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def worker_log(home: Path) -> str:
    return (home / "worker.log").read_text(errors="replace")


@pytest.fixture
def own_broker(tmp_path: Path, models_home: Path) -> Iterator[tuple[Path, Broker]]:
    home = fresh_home(tmp_path, models_home)
    broker = ensure_embedded(home)
    try:
        yield home, broker
    finally:
        stop_embedded(home)


@pytest.mark.parametrize("queues", ["vision", "stt"])
def test_a_worker_stops_within_its_grace_with_the_broker_gone(
    own_broker: tuple[Path, Broker], fake_openai: FakeOpenAI, queues: str
) -> None:
    home, broker = own_broker
    proc = start_worker(home, node_env(home, fake_openai, MCP_MEDIA_REDIS_URL=broker.url), queues)
    try:
        assert wait_for(lambda: " ready." in worker_log(home), 240), worker_log(home)
        stop_embedded(home)
        assert wait_for(lambda: "Connection to broker lost" in worker_log(home), 60)
        proc.send_signal(signal.SIGTERM)
        # Its stop no longer waits on the store's half-minute of retries (it did: 35 s).
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == 0, worker_log(home)[-3000:]


def test_a_worker_rides_out_a_broker_refusing_writes(
    own_broker: tuple[Path, Broker], fake_openai: FakeOpenAI
) -> None:
    home, broker = own_broker
    env = node_env(home, fake_openai, MCP_MEDIA_REDIS_URL=broker.url)
    proc = start_worker(home, env, "tts")
    client = redis.Redis.from_url(broker.url)
    try:
        assert wait_for(lambda: " ready." in worker_log(home), 240), worker_log(home)
        folder = refuse_writes(client)
        # The worker met the refusal and is retrying (before: "Unrecoverable error", exit 0).
        assert wait_for(lambda: worker_log(home).count("MISCONF") >= 2, 120), worker_log(home)
        assert proc.poll() is None, worker_log(home)[-3000:]
        take_writes(client, folder)
        assert speak(env, "Writes work again.") is Status.DONE
        assert proc.poll() is None
    finally:
        client.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
