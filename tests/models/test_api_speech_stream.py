"""Streamed speech formats of `/v1/audio/speech` through the real `openai` client, against a
real serve process and a tts worker with a prepared voice: raw PCM with its rate in the
content type and in X-Audio-Sample-Rate, and OpenAI's server-sent events
(`speech.audio.delta` with base64 audio, then `speech.audio.done`), both arriving as the
sentences are voiced, before the job has stored its whole file."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from pipelines.media import Capability
from tests.support.cluster import Cluster
from tests.support.serve import DETERMINISTIC_VOICE, Served, speech_door
from workers.core.stage_configs import store_request, synthesis_request

pytestmark = pytest.mark.models

VOICE = "piper-en_US-joe-medium"
TEXT = " ".join(
    f"Line {n} of the streamed reading is spoken here, one by one." for n in range(1, 13)
)


@pytest.fixture(scope="module")
def door(
    tmp_path_factory: pytest.TempPathFactory, broker: Any, models_home: Path
) -> Iterator[tuple[Cluster, Served, OpenAI]]:
    home = tmp_path_factory.mktemp("speech-stream") / "home"
    with speech_door(home, broker, models_home, {"tts": 1}, **DETERMINISTIC_VOICE) as found:
        yield found


def _stored(cluster: Cluster, text: str, fmt: str) -> bool:
    """Whether the job of this request has stored its result (the whole file) yet."""
    client = cluster.client()
    params = synthesis_request(text, client.settings, fmt=fmt, speed=1.0, voice=VOICE)
    key = client.key(Capability.AUDIO_SYNTHESIZE, store_request(client.settings, params).sha256)
    found = client.state.results.get(key) is not None
    client.close()
    return found


def test_pcm_streams_with_its_rate(door: tuple[Cluster, Served, OpenAI]) -> None:
    cluster, _served, api = door
    with api.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm;rate=24000"
        assert response.headers["x-audio-sample-rate"] == "24000"
        chunks = response.iter_bytes(4096)
        first = next(chunks)
        assert not _stored(cluster, TEXT, "pcm")  # the first sentences left before the last
        pcm = first + b"".join(chunks)
    assert len(pcm) % 2 == 0 and len(pcm) / 2 / 24_000 > 10  # twelve lines of speech
    # The stored file is the same audio: the second request is a cache hit with the rate too.
    again = api.audio.speech.with_raw_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm"
    )
    assert again.headers["x-audio-sample-rate"] == "24000"
    assert again.content == pcm


def test_sse_through_the_openai_client(door: tuple[Cluster, Served, OpenAI]) -> None:
    cluster, _served, api = door
    text = TEXT.replace("streamed", "eventful")  # another job than the test above
    with api.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=text, response_format="pcm", stream_format="sse"
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-audio-sample-rate"] == "24000"
        lines = (line for line in response.iter_lines() if line.startswith("data: "))
        events = [json.loads(next(lines)[6:])]
        assert events[0]["type"] == "speech.audio.delta"
        assert not _stored(cluster, text, "pcm")  # the first event came before the whole file
        events += [json.loads(line[6:]) for line in lines]
    assert [e["type"] for e in events[-1:]] == ["speech.audio.done"]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) == len(events) - 1 and len(deltas) > 1  # pieces, not one blob
    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(pcm) / 2 / 24_000 > 10


def test_sse_of_a_stored_file_and_a_bad_stream_format(
    door: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, _served, api = door
    short = "A stored reading, asked for again as events."
    whole = api.audio.speech.create(
        model="tts-1", voice="alloy", input=short, response_format="wav"
    )
    events = [
        json.loads(line[6:])
        for line in api.audio.speech.create(
            model="tts-1", voice="alloy", input=short, response_format="wav", stream_format="sse"
        ).iter_lines()
        if line.startswith("data: ")
    ]
    assert events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    # the stored file relayed as events; the first answer was streamed, its header's sizes
    # not yet known (the stored file has them patched in)
    assert audio[:4] == b"RIFF" and len(audio) == len(whole.content)
    assert audio[-4096:] == whole.content[-4096:]
    with pytest.raises(Exception) as refused:
        api.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input=short,
            stream_format="chunks",  # type: ignore[arg-type]
        )
    assert getattr(refused.value, "status_code", None) == 400
