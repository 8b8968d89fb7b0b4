"""`mcp-media serve` under faults and hostile bodies, as a real process with a real Redis:
every request is answered in the OpenAI shape, fast, and the process keeps serving.

Timeouts here are the clients' own (a hang fails the test); nothing asserts how long a
request took."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
import redis
from openai import OpenAI

from tests.integration.conftest import Cluster
from tests.support.audio_samples import encode, tone
from tests.support.disk import files_in, fill, on_tmpfs, seen_by
from tests.support.net import free_port
from tests.support.redis_servers import RedisProcess, debian_redis
from tests.support.serve import Served, serve
from workers.core import keys

pytestmark = pytest.mark.integration

# A shaped answer must come well within this; the old door took about 35 s.
CLIENT_TIMEOUT = 5.0


def _wav(seconds: float) -> bytes:
    return encode(tone(seconds), 16_000, "wav")


def _api(served: Served) -> OpenAI:
    return served.openai(timeout=CLIENT_TIMEOUT)


def _announce(url: str, *queues: str) -> None:
    """Workers registered for `queues` (what the heartbeat writes), so /readyz and the
    routes find the queues served."""
    client = redis.Redis.from_url(url)
    seconds, _ = client.time()
    for queue in queues:
        entry = {"name": f"{queue}@test", "queues": [queue], "pool": "prefork",
                 "seen": seconds + 3600}  # fmt: skip
        client.hset(keys.WORKERS, f"{queue}@test", json.dumps(entry))
    client.close()


def _still_serving(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.key}"}
    answer = httpx2.get(f"{served.url}/v1/models", headers=auth, timeout=CLIENT_TIMEOUT)
    assert answer.status_code == 200 and answer.json()["data"]
    assert served.proc.poll() is None


@pytest.fixture
def own_broker(tmp_path: Path, cluster: Cluster) -> Iterator[RedisProcess]:
    """A Redis of this test's own (it is stopped and started again), the cluster on it."""
    server = RedisProcess(
        tmp_path / "own-redis",
        ["port {port}", 'save ""', "appendonly no"],
        lambda: redis.Redis("127.0.0.1", server.port, socket_timeout=2),
    )
    server.start()
    cluster.env_vars["MCP_MEDIA_REDIS_URL"] = f"redis://127.0.0.1:{server.port}/0"
    yield server
    server.stop()


def test_a_stopped_broker_is_a_shaped_503_at_once_and_serving_resumes(
    cluster: Cluster, own_broker: RedisProcess
) -> None:
    url = cluster.env_vars["MCP_MEDIA_REDIS_URL"]
    with serve(cluster) as served:
        api = _api(served)
        assert httpx2.get(f"{served.url}/readyz", timeout=CLIENT_TIMEOUT).status_code == 503
        own_broker.stop()
        for _ in range(3):  # and again: no request waits the outage out
            with pytest.raises(openai.APIStatusError) as caught:
                api.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
            error = caught.value
            assert (error.status_code, error.code) == (503, "broker_unavailable")
            assert f"127.0.0.1:{own_broker.port}" in error.message
            assert error.response.headers["retry-after"] == "5"
            with pytest.raises(openai.APIStatusError) as caught:
                api.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(1.0)))
            assert (caught.value.status_code, caught.value.code) == (503, "broker_unavailable")
            ready = httpx2.get(f"{served.url}/readyz", timeout=CLIENT_TIMEOUT)
            assert ready.status_code == 503 and ready.json()["code"] == "broker_unavailable"
            assert ready.headers["retry-after"] == "5"
            health = httpx2.get(f"{served.url}/healthz", timeout=CLIENT_TIMEOUT)
            assert health.status_code == 200  # the process itself is fine
        log = served.log.read_text()
        assert "Traceback" not in log and "internal error" not in log

        own_broker.start()  # the same port: the door reconnects by itself
        _announce(url, "stt", "tts")
        ready = httpx2.get(f"{served.url}/readyz", timeout=CLIENT_TIMEOUT)
        assert ready.status_code == 200, ready.text
        assert ready.json()["workers"] == {"stt": 1, "tts": 1}
        _still_serving(served)


def test_a_full_disk_is_a_507_naming_the_folder_and_leaves_no_partial_file(
    cluster: Cluster,
) -> None:
    cache = cluster.home / "cache"
    with serve(cluster, prefix=on_tmpfs(cache, 384)) as served:
        seen = seen_by(served.proc.pid, cache)
        api = _api(served)
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(8.0)))
        error = caught.value
        assert (error.status_code, error.code) == (507, "insufficient_storage"), error.message
        assert "No space left on device" in error.message
        assert str(cache / "uploads") in error.message
        assert files_in(seen) == []  # the partial upload is gone

        filler = fill(seen)
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
        assert (caught.value.status_code, caught.value.code) == (507, "insufficient_storage")
        assert str(cache) in caught.value.message
        assert files_in(seen) == ["filler"]

        filler.unlink()  # space again: the same process stores uploads again
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("b.wav", _wav(1.0)))
        assert (caught.value.status_code, caught.value.code) == (503, "no_worker")
        assert [name for name in files_in(seen) if name.startswith("audio/")]
        assert "Traceback" not in served.log.read_text()


def _broker_on_full_disk(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server whose data folder is a 64 kB tmpfs."""
    port = free_port()
    data = folder / "data"
    conf = folder / "redis.conf"
    folder.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {data}\nlogfile {folder / 'redis.log'}\n"
        # With a save point, a failed save stops writes (MISCONF).
        "save 3600 1\nappendonly no\nstop-writes-on-bgsave-error yes\n"
    )
    proc = subprocess.Popen(
        [*on_tmpfs(data, 64), str(debian_redis()), str(conf)], start_new_session=True
    )
    deadline = time.monotonic() + 30
    while True:
        client = redis.Redis("127.0.0.1", port, socket_timeout=2)
        try:
            client.ping()
            return proc, port
        except redis.ConnectionError:
            assert proc.poll() is None and time.monotonic() < deadline, "redis did not start"
            time.sleep(0.05)
        finally:
            client.close()


def test_a_broker_that_cannot_persist_is_a_503_naming_misconf(
    cluster: Cluster, tmp_path: Path
) -> None:
    proc, port = _broker_on_full_disk(tmp_path / "full-redis")
    try:
        url = f"redis://127.0.0.1:{port}/0"
        _announce(url, "tts")
        client = redis.Redis.from_url(url, socket_timeout=5)
        client.set("filler", os.urandom(200_000))  # incompressible: the save cannot fit
        client.bgsave()
        deadline = time.monotonic() + 60
        while client.info("persistence")["rdb_last_bgsave_status"] != "err":
            assert time.monotonic() < deadline, "the save did not fail"
            time.sleep(0.05)
        with pytest.raises(redis.ResponseError, match="MISCONF"):
            client.set("k", "v")  # the state the door must name
        client.close()
        cluster.env_vars["MCP_MEDIA_REDIS_URL"] = url
        with serve(cluster) as served:
            with pytest.raises(openai.APIStatusError) as caught:
                _api(served).audio.speech.create(model="tts-1", voice="alloy", input="Hi there.")
            error = caught.value
            assert (error.status_code, error.code) == (503, "broker_cannot_persist")
            assert "MISCONF" in error.message and error.response.headers["retry-after"]
            _still_serving(served)
    finally:
        proc.kill()  # SIGTERM would save first, and that fails: it would not stop
        proc.wait(timeout=30)


def test_hostile_bodies_are_400s_with_their_codes_and_the_door_keeps_serving(
    cluster: Cluster,
) -> None:
    with serve(cluster) as served:
        auth = {"Authorization": f"Bearer {served.key}"}
        speech = f"{served.url}/v1/audio/speech"
        upload = f"{served.url}/v1/audio/transcriptions"

        def refused(response: httpx2.Response, code: str, param: str | None = None) -> None:
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert error["code"] == code and error["message"], error
            if param is not None:
                assert error["param"] == param
            _still_serving(served)

        boundary = "b" * 10_000  # past RFC 2046's 70; a longer one is past the head's 16 KiB
        body = f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        refused(
            httpx2.post(
                upload,
                content=f"{body}--{boundary}--\r\n".encode(),
                headers={**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"},
                timeout=CLIENT_TIMEOUT,
            ),
            "invalid_boundary",
        )
        deep = b'{"model": "tts-1", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert len(deep) < 256 * 1024  # under the body cap: the depth is what is refused
        json_headers = {**auth, "Content-Type": "application/json"}
        refused(
            httpx2.post(speech, content=deep, headers=json_headers, timeout=CLIENT_TIMEOUT),
            "json_too_deep",
        )
        refused(
            httpx2.post(
                speech,
                content=b'{"input": "hi", "speed": 1e999}',
                headers=json_headers,
                timeout=CLIENT_TIMEOUT,
            ),
            "invalid_number",
        )
        # (The openai client cannot even send it: its encoder refuses lone surrogates.)
        refused(
            httpx2.post(
                speech,
                content=b'{"model": "tts-1", "voice": "alloy", "input": "\\ud800 hello"}',
                headers=json_headers,
                timeout=CLIENT_TIMEOUT,
            ),
            "invalid_text",
            "input",
        )
        refused(
            httpx2.post(
                upload,
                files={"file": ("a.wav", _wav(0.5))},
                data={"model": "whisper-1", "language": b"\xff\xfe"},
                headers=auth,
                timeout=CLIENT_TIMEOUT,
            ),
            "invalid_text",
            "language",
        )
        log = served.log.read_text()
        assert "Traceback" not in log and "internal error" not in log


def test_serve_starts_while_the_broker_is_down_and_serves_once_it_is_up(
    cluster: Cluster, own_broker: RedisProcess
) -> None:
    url = cluster.env_vars["MCP_MEDIA_REDIS_URL"]
    own_broker.stop()
    with serve(cluster) as served:
        ready = httpx2.get(f"{served.url}/readyz", timeout=CLIENT_TIMEOUT)
        assert ready.status_code == 503 and ready.json()["code"] == "broker_unavailable"
        auth = {"Authorization": f"Bearer {served.key}"}
        scrape = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=CLIENT_TIMEOUT)
        assert scrape.status_code == 503
        assert scrape.json()["error"]["code"] == "broker_unavailable"
        own_broker.start()
        _announce(url, "stt", "tts")
        assert httpx2.get(f"{served.url}/readyz", timeout=CLIENT_TIMEOUT).status_code == 200
        scrape = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=CLIENT_TIMEOUT)
        assert 'mcp_media_workers{queue="tts"} 1.0' in scrape.text
