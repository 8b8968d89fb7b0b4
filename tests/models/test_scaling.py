"""Two worker processes with different node names, one Redis and one cache, drain a burst of
mixed jobs: every job done once, none lost, both nodes used, status shows both."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from pipelines.engines.registry import load_tts
from pipelines.media import Capability, JobRequest, MediaKind
from pipelines.results import Status
from pipelines.speech.audio import write_wav
from pipelines.speech.config import TtsConfig
from tests.integration.test_vision_jobs import noisy_png
from tests.support.cluster import Cluster
from workers.core.stage_configs import store_request, synthesis_request

pytestmark = pytest.mark.models

STORED = re.compile(r"stored \w+ result for (\S+) \(job ")


@pytest.fixture
def shared(speech_cluster: Cluster) -> Cluster:
    return speech_cluster


def test_two_nodes_drain_forty_mixed_jobs_once_each(
    shared: Cluster, models_home: Path, tmp_path: Path
) -> None:
    shared.fake.set(latency=0.1, reply="shared summary")
    settings = shared.settings()
    cache = settings.media_cache()
    voice = load_tts(TtsConfig(models_home / "models" / "piper-en_US-joe-medium"))
    jobs = []
    for i in range(20):
        stored = cache.store_file(noisy_png(tmp_path / f"{i}.png", 900 + i), MediaKind.IMAGE)
        jobs.append(JobRequest(Capability.VISION_SUMMARIZE, stored.sha256, stored.path))
    for i in range(15):
        speech = voice.synthesize(f"This is voice note number {i + 1}.")
        assert speech.samples is not None
        clip = write_wav(tmp_path / f"{i}.wav", speech.samples, speech.sample_rate)
        stored = cache.store_file(clip, MediaKind.AUDIO)
        jobs.append(JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path))
    for i in range(5):
        stored = store_request(
            settings, synthesis_request(f"Reply {i + 1} is on its way.", settings)
        )
        jobs.append(JobRequest(Capability.AUDIO_SYNTHESIZE, stored.sha256, stored.path))

    first = shared.start_worker("vision,stt,tts", concurrency=1)
    second = shared.start_worker("vision,stt,tts", concurrency=1)
    client = shared.client()
    try:
        handles = client.wait(client.submit(jobs), timeout=300)
    finally:
        client.close()
    assert [h.status for h in handles] == [Status.DONE] * 40
    nodes = Counter(h.envelope.worker for h in handles if h.envelope is not None)
    assert len(nodes) == 2, nodes
    assert {n.split("-")[-1].split("@")[0] for n in nodes if n} == {
        str(first.proc.pid),
        str(second.proc.pid),
    }
    stored_keys = Counter(STORED.findall(first.text()) + STORED.findall(second.text()))
    assert len(stored_keys) == 40
    assert set(stored_keys.values()) == {1}  # no job processed twice
    status = shared.cli_json("status")
    assert len(status["workers"]) == 2
    for worker in status["workers"]:
        assert worker["queues"] == ["vision", "stt", "tts"]
        assert worker["pool"] == "prefork" and worker["concurrency"] == 1
        assert worker["threads"] == 1
