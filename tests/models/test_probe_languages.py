"""The start-up probes fit the configured models: a multilingual recognizer beside a Chinese
voice starts (the STT probe once spoke its English phrase with the Chinese voice, whisper
heard Japanese, and `up` exited). Its own module: `up` must not share the session broker
with another module's workers."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.support.cluster import ROOT, Cluster
from tests.support.net import free_port
from tests.support.up import wait_ready

pytestmark = pytest.mark.models


def test_up_starts_with_whisper_base_and_a_chinese_voice(speech_cluster: Cluster) -> None:
    port = free_port()
    log = speech_cluster.home / "up.log"
    env = speech_cluster.env(
        MCP_MEDIA_API__PORT=str(port),
        MCP_MEDIA_STT__MODEL="whisper-base",
        MCP_MEDIA_TTS__VOICE="zf_xiaobei",
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "up", "--api", "--grace", "20"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}", 240, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    assert code == 0, log.read_text()
