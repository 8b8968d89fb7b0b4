"""Every Wyoming request goes through the job gateway: with no worker it is refused
(`no_worker`); with a worker that takes nothing, a transcription is admitted to the live
lane, a second one past the high water is refused (`queue_full`), the first one again joins
its job, and a wait that runs out names the job. A real door and a real broker."""

from __future__ import annotations

import re

import pytest
import redis
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import Synthesize

from tests.integration.test_api_serve import _announce
from tests.support.cluster import Cluster
from tests.support.wyoming_door import WyomingDoor, run, wyoming

pytestmark = pytest.mark.integration


def utterance(door: WyomingDoor, seconds: float) -> Error:
    pcm = bytes(int(seconds * 32_000))  # silence: never transcribed here, only admitted
    events = [
        AudioStart(16_000, 2, 1).event(),
        AudioChunk(16_000, 2, 1, pcm).event(),
        AudioStop().event(),
    ]
    answer = run(door.client(), events, ["transcript"])[-1]
    assert answer.type == "error", answer
    return Error.from_event(answer)


def test_no_worker_is_refused_and_audio_past_the_blob_bound_too(cluster: Cluster) -> None:
    with wyoming(cluster, MCP_MEDIA_MAX_BLOB_BYTES="40000") as door:
        said: Event = run(door.client(), [Synthesize("Hello there.").event()], ["audio-stop"])[-1]
        assert Error.from_event(said).code == "no_worker"
        assert utterance(door, 1.0).code == "no_worker"  # 32 kB
        assert utterance(door, 2.0).code == "audio_too_large"  # 64 kB, within its seconds


def test_admission_refuses_past_the_high_water_and_joins_the_job_in_flight(
    cluster: Cluster,
) -> None:
    _announce(cluster, "stt")
    with wyoming(cluster, "--wait", "1", MCP_MEDIA_JOBS__HIGH_WATER="1") as door:
        first = utterance(door, 1.0)
        assert first.code == "timeout"
        job = re.search(r"job (\S+) did not finish", first.text)
        assert job is not None
        assert utterance(door, 2.0).code == "queue_full"
        again = utterance(door, 1.0)  # the same audio: its job, not a new one
        assert again.code == "timeout" and job.group(1) in again.text
    broker = redis.Redis.from_url(cluster.broker.url)
    try:
        assert broker.llen("stt") == 1 and broker.llen("stt.batch") == 0  # the live lane
    finally:
        broker.close()
