"""`mcp-media serve`: the process, its key and its refusals, against a real server process."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import httpx2
import openai
import pytest

from tests.integration.conftest import Cluster
from tests.support.factories import wav_bytes
from tests.support.serve import serve

pytestmark = pytest.mark.integration


def test_health_is_open_and_the_api_needs_the_generated_key(cluster: Cluster) -> None:
    with serve(cluster) as served:
        assert httpx2.get(f"{served.url}/healthz", timeout=10).json() == {"status": "ok"}
        key_file = cluster.home / "api-key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key-wrong-key"},
            {"Authorization": "x"},
        ):
            response = httpx2.get(f"{served.url}/v1/models", headers=headers, timeout=10)
            assert response.status_code == 401
            error = response.json()["error"]
            assert error["type"] == "authentication_error" and error["message"]
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert httpx2.get(f"{served.url}/metrics", timeout=10).status_code == 401
        auth = {"Authorization": f"Bearer {served.key}"}
        metrics = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=10).text
        assert 'mcp_media_api_requests_total{code="401",route="/v1/models"} 3.0' in metrics
        assert 'mcp_media_queue_depth{queue="stt"} 0.0' in metrics


def test_a_key_from_the_environment_is_used_and_no_file_is_made(cluster: Cluster) -> None:
    key = "k" * 24
    with serve(cluster, MCP_MEDIA_API__KEY=key) as served:
        assert served.key == key
        assert not (cluster.home / "api-key").exists()
        wrong = httpx2.get(f"{served.url}/v1/models", timeout=10)
        assert wrong.status_code == 401


def test_non_loopback_without_a_key_is_refused_at_start(cluster: Cluster) -> None:
    proc = cluster.cli("serve", "--host", "0.0.0.0", "--port", "8799", timeout=60)
    assert proc.returncode == 2
    assert "without a key: set MCP_MEDIA_API__KEY" in proc.stderr


def test_a_short_key_and_a_busy_port_are_refused_in_one_line(cluster: Cluster) -> None:
    proc = cluster.cli("serve", "--port", "8798", MCP_MEDIA_API__KEY="short", timeout=60)
    assert proc.returncode == 2 and "at least 16 characters" in proc.stderr
    with serve(cluster) as served:
        port = served.url.rsplit(":", 1)[1]
        busy = cluster.cli("serve", "--port", port, timeout=60)
        assert busy.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1


def _wav(seconds: float = 1.0) -> bytes:
    from tests.support.audio_samples import encode, tone

    return encode(tone(seconds), 16_000, "wav")


def _announce(cluster: Cluster, queue: str) -> None:
    """A worker registered for `queue` that takes nothing (as a stuck one would): what the
    heartbeat writes, so the queue fills up and stays full."""
    import json

    import redis

    from workers.core import keys

    client = redis.Redis.from_url(cluster.broker.url)
    seconds, _ = client.time()
    entry = {"name": "stuck@test", "queues": [queue], "pool": "prefork", "seen": seconds + 3600}
    client.hset(keys.WORKERS, "stuck@test", json.dumps(entry))
    client.close()


def test_no_worker_is_a_503_and_readyz_says_not_ready(cluster: Cluster) -> None:
    with serve(cluster) as served:
        api = served.openai()
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav()))
        assert caught.value.status_code == 503
        assert "no worker serves the 'stt' queue" in caught.value.message
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
        assert caught.value.status_code == 503
        ready = httpx2.get(f"{served.url}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json()["workers"] == {"stt": 0, "tts": 0}


def test_a_full_queue_is_a_429_a_job_still_queued_past_the_wait_a_429_a_running_one_a_504(
    cluster: Cluster,
) -> None:
    _announce(cluster, "stt")
    env = {"MCP_MEDIA_JOBS__HIGH_WATER": "1", "MCP_MEDIA_API__WAIT": "1"}
    with serve(cluster, **env) as served:
        api = served.openai()
        # no worker takes the job: at the end of the wait it is a 429 (retry), not a 504
        with pytest.raises(openai.RateLimitError) as late:
            api.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(1.0)))
        assert late.value.code == "rate_limit_exceeded"
        job_id = late.value.response.headers["x-job-id"]
        assert job_id in late.value.message and "it stays queued" in late.value.message
        assert int(late.value.response.headers["retry-after"]) >= 1
        with pytest.raises(openai.RateLimitError) as limited:
            api.audio.transcriptions.create(model="whisper-1", file=("b.wav", _wav(2.0)))
        assert limited.value.code == "queue_full"
        assert limited.value.response.headers["retry-after"] == "5"
        status = cluster.cli_json("result", job_id)  # the job the 429 named is known, queued
        assert (status["id"], status["status"]) == (job_id, "pending")
        # a worker takes it (as `workers.jobs.execute` says): the retry joins it, and a wait
        # that runs out while it runs is a 504 naming it
        client = cluster.client()
        try:
            client.state.admission.started("stt", job_id)
        finally:
            client.close()
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("a.wav", _wav(1.0)))
        assert caught.value.status_code == 504
        assert caught.value.response.headers["x-job-id"] == job_id
        assert job_id in caught.value.message


def test_oversize_and_garbage_uploads_are_refused_and_serving_goes_on(cluster: Cluster) -> None:
    with serve(cluster, MCP_MEDIA_API__MAX_UPLOAD_MB="0.05") as served:
        api = served.openai()
        big = _wav(3.0)  # ~96 kB, over 0.05 MB
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("big.wav", big))
        assert caught.value.status_code == 413
        assert caught.value.body["code"] == "upload_too_large"  # type: ignore[index]

        boundary = "b0undary"

        def chunked() -> Iterator[bytes]:  # no Content-Length: the cap is met while streaming
            yield (
                f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"'
                "\r\nContent-Type: audio/wav\r\n\r\n"
            ).encode()
            for _ in range(20):
                yield b"\0" * 8192
            yield f"\r\n--{boundary}--\r\n".encode()

        streamed = httpx2.post(
            f"{served.url}/v1/audio/transcriptions",
            content=chunked(),
            headers={
                "Authorization": f"Bearer {served.key}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
            timeout=30,
        )
        assert streamed.status_code == 413
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("x.mp3", b"<html>no</html>"))
        assert caught.value.status_code == 415
        with pytest.raises(openai.APIStatusError) as caught:
            api.audio.transcriptions.create(model="whisper-1", file=("e.wav", b""))
        assert caught.value.status_code == 415
        bad = httpx2.post(
            f"{served.url}/v1/audio/transcriptions",
            content=b"not multipart",
            headers={"Authorization": f"Bearer {served.key}"},
            timeout=30,
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        assert httpx2.get(f"{served.url}/healthz", timeout=10).status_code == 200
    uploads = cluster.home / "cache" / "uploads"
    assert not any(uploads.iterdir()) if uploads.exists() else True


def test_hostile_requests_leave_metrics_bounded_and_get_shaped_answers(cluster: Cluster) -> None:
    """Random paths add no series; a foreign Host is refused (DNS rebinding); input that
    breaks a route is an OpenAI-shaped error with a request id, and the door keeps serving."""
    with serve(cluster) as served:
        auth = {"Authorization": f"Bearer {served.key}"}
        with httpx2.Client(timeout=10) as http:
            for i in range(300):
                assert http.get(f"{served.url}/v1/{i:x}{'ab' * 40}").status_code == 401
                assert http.get(f"{served.url}/x{i}", headers=auth).status_code == 404
            metrics = http.get(f"{served.url}/metrics", headers=auth).text
            series = [
                line for line in metrics.splitlines()
                if line.startswith("mcp_media_api_requests_total{")
            ]  # fmt: skip
            assert len(series) <= 3, series  # other/401, other/404, and nothing per path
            assert 'mcp_media_api_requests_total{code="401",route="other"} 300.0' in metrics
            foreign = http.get(f"{served.url}/v1/models", headers={**auth, "Host": "evil.example"})
            assert foreign.status_code == 421
            assert foreign.json()["error"]["code"] == "invalid_host"
            deep = "[" * 100_000 + "]" * 100_000
            for body in (
                '{"model": "tts-1", "voice": "alloy", "input": ' + deep + "}",
                '{"model": "tts-1", "voice": "alloy", "input": "\\ud800 hello"}',
            ):
                answer = http.post(
                    f"{served.url}/v1/audio/speech",
                    content=body.encode(),
                    headers={**auth, "Content-Type": "application/json"},
                )
                assert 400 <= answer.status_code < 600, answer.text[:200]
                error = answer.json()["error"]
                assert error["message"] and error["type"], error
                if answer.status_code == 500:
                    assert answer.headers["x-request-id"] in error["message"]
                    assert "Traceback" not in answer.text
            assert http.get(f"{served.url}/v1/models", headers=auth).status_code == 200


def test_an_upload_that_is_the_homes_first_write_makes_private_folders(cluster: Cluster) -> None:
    with serve(cluster) as served:
        assert not (cluster.home / "cache").exists()
        httpx2.post(
            f"{served.url}/v1/audio/transcriptions",
            headers={"Authorization": f"Bearer {served.key}"},
            files={"file": ("note.wav", wav_bytes(), "audio/wav")},
            data={"model": "whisper-1"},
            timeout=30,
        )
        made = [cluster.home / "cache", *(cluster.home / "cache").rglob("*")]
        folders = [p for p in made if p.is_dir()]
        assert folders and all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in folders), [
            (p, oct(p.stat().st_mode)) for p in folders
        ]


def test_the_voice_and_model_lists_are_open_on_loopback_only(cluster: Cluster) -> None:
    """Open WebUI asks for `{base}/audio/voices` and `{base}/audio/models` without a key and
    reads `voices[].id`/`name` and `models[].id`: on a loopback bind both answer; every other
    /v1 path keeps its key; `API__PUBLIC_CATALOG=false`, or a bind off loopback, keys them."""
    lists = ("/v1/audio/voices", "/v1/audio/models")
    with serve(cluster) as served:
        for path in lists:
            response = httpx2.get(f"{served.url}{path}", timeout=10)
            assert response.status_code == 200, path
        voices = httpx2.get(f"{served.url}/v1/audio/voices", timeout=10).json()
        assert isinstance(voices["voices"], list)
        models = httpx2.get(f"{served.url}/v1/audio/models", timeout=10).json()
        ids = [m["id"] for m in models.get("models", [])]  # as Open WebUI reads them
        assert ids[:3] == ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"]
        assert models["object"] == "list" and models["data"][0]["object"] == "model"
        assert httpx2.get(f"{served.url}/v1/models", timeout=10).status_code == 401
        assert httpx2.get(f"{served.url}/v1/audio/voices/", timeout=10).status_code == 401
    with serve(cluster, MCP_MEDIA_API__PUBLIC_CATALOG="false") as served:
        for path in lists:
            assert httpx2.get(f"{served.url}{path}", timeout=10).status_code == 401, path
    key = "k" * 24
    with serve(cluster, "--host", "0.0.0.0", MCP_MEDIA_API__KEY=key) as served:
        for path in lists:
            assert httpx2.get(f"{served.url}{path}", timeout=10).status_code == 401, path
            keyed = {"Authorization": f"Bearer {key}"}
            assert httpx2.get(f"{served.url}{path}", headers=keyed, timeout=10).status_code == 200
