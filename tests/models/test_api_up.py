"""`mcp-media up --api`: serve beside the workers, ready when /readyz says so, stopped by
SIGTERM with them. Its own module: the workers of test_api_audio's module-wide cluster share
the session's broker and must be gone before this one starts."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from openai import OpenAI

from tests.models.test_api_audio import SENTENCE, heard, transcribe
from tests.support.cluster import ROOT, Cluster
from tests.support.net import free_port
from tests.support.up import wait_ready

pytestmark = pytest.mark.models


def test_up_with_api_serves_speech_and_sigterm_stops_it(
    cluster: Cluster, models_home: Path
) -> None:
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    port = free_port()
    log = cluster.home / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "up", "--api", "--grace", "20"],
            cwd=ROOT,
            env=cluster.env(MCP_MEDIA_API__PORT=str(port)),
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(proc, url, 300, log)
        address = f"http://127.0.0.1:{port}"
        assert f"API {address}/v1, jobs page {address}/" in log.read_text()
        key = (cluster.home / "api-key").read_text().strip()
        with OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as api:
            audio = api.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE).content
            assert heard(SENTENCE, transcribe(api, audio, "up.mp3").text) >= 0.8
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    assert code == 0, log.read_text()
    with pytest.raises(httpx2.TransportError):
        httpx2.get(f"{url}/healthz", timeout=5)
