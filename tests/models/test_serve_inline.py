"""`mcp-media serve --inline`: the whole OpenAI audio API in one process, no broker, no
worker. The broker URL the process is given points at a closed port, so any call that went
to a broker would fail: every answer here came from the in-process gateway."""

from __future__ import annotations

import re

import httpx2
import pytest

from tests.support.cluster import Cluster
from tests.support.net import free_port
from tests.support.serve import DETERMINISTIC_VOICE, serve
from workers.core.capabilities import lane_queues

pytestmark = pytest.mark.models


def test_serve_inline_speaks_and_transcribes_with_no_broker(speech_cluster: Cluster) -> None:
    speech_cluster.env_vars["MCP_MEDIA_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    with serve(speech_cluster, "--inline", **DETERMINISTIC_VOICE) as served:
        api = served.openai(timeout=300)
        listed = api.get("/audio/voices", cast_to=object)
        assert isinstance(listed, dict)
        assert "piper-en_US-joe-medium" in {v["id"] for v in listed["voices"]}
        text = "This door runs every job in its own process."
        spoken = api.audio.speech.create(
            model="tts-1", voice="alloy", input=text, response_format="wav"
        )
        assert spoken.content[:4] == b"RIFF" and len(spoken.content) > 20_000
        again = api.audio.speech.create(
            model="tts-1", voice="alloy", input=text, response_format="wav"
        )
        # The stored result answers the same request: the same samples, now with the
        # lengths in the header that a stream could not know yet.
        assert len(again.content) == len(spoken.content)
        assert again.content[-20_000:] == spoken.content[-20_000:]
        heard = api.audio.transcriptions.create(
            model="whisper-1", file=("reply.wav", spoken.content, "audio/wav")
        )
        words = heard.text.lower()
        assert "every job" in words and "process" in words, heard.text
        ready = httpx2.get(f"{served.url}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
        # /metrics shows this process's own queues: nothing waits once the jobs are done
        auth = {"Authorization": f"Bearer {served.key}"}
        metrics = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=30).text
        waiting = re.findall(r'^mcp_media_queue_waiting\{.*queue="([^"]+)"\} (\S+)$', metrics, re.M)
        assert dict(waiting) == {q: "0.0" for q in lane_queues()}, waiting
        assert re.search(
            r'^mcp_media_jobs\{capability="audio.synthesize",status="done"\} [1-9]', metrics, re.M
        )
    assert not (speech_cluster.home / "redis").exists()  # no embedded broker was started
