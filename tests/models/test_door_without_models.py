"""One truth of capability: a door on a node with no models serves what its workers announce.

Two homes share only Redis and an S3 bucket (a real SeaweedFS). The worker home has both
tiers and runs the quality tier (Kokoro v1.0, multilingual whisper base); the door home has no
`models/` at all. Through the door's OpenAI audio API, with the real `openai` client: Kokoro
voices are listed and speak by name, words are timed and `language=zh` is taken; a voice no
worker serves is a 400 naming what is served."""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai import OpenAI

from tests.support.cluster import Cluster
from tests.support.serve import serve

pytestmark = pytest.mark.models

QUALITY_ENV = {"MCP_MEDIA_STT__MODEL": "whisper-base", "MCP_MEDIA_TTS__VOICE": "kokoro-v1.0"}
CHINESE = "今天天气很好。"


@pytest.fixture
def door(
    nodes: tuple[Cluster, Cluster], models_home: Path, quality_models: object
) -> Iterator[OpenAI]:
    """The door (node A: no models) in front of node B's stt and tts workers."""
    door_node, worker_node = nodes
    worker_node.home.mkdir(parents=True, exist_ok=True)
    (worker_node.home / "models").symlink_to(models_home / "models")
    worker_node.env_vars.update(QUALITY_ENV)
    worker_node.start_worker("tts", concurrency=1)
    worker_node.start_worker("stt", concurrency=1)
    assert not (door_node.home / "models").exists()
    with serve(door_node) as served:
        yield served.openai(timeout=300)


def _wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as clip:
        frames, rate = clip.getnframes(), clip.getframerate()
    return float(frames) / float(rate)


def test_a_door_without_models_serves_what_its_workers_announce(door: OpenAI) -> None:
    listed = door.get("/audio/voices", cast_to=object)
    assert isinstance(listed, dict)
    voices = {v["id"]: v for v in listed["voices"]}
    assert voices["af_heart"]["model"] == "kokoro-v1.0"
    assert voices["zf_xiaobei"]["language"] == "zh"
    assert listed["aliases"]["alloy"] == "kokoro-v1.0"  # the workers' voice: its first, English
    models = door.get("/audio/models", cast_to=object)
    assert isinstance(models, dict)
    assert "kokoro-v1.0" in {m["id"] for m in models["data"]}

    spoken = door.audio.speech.create(
        model="tts-1", voice="af_heart", input="Seven green boxes wait by the dock.",
        response_format="wav",
    )  # fmt: skip
    english = spoken.content
    assert _wav_seconds(english) > 1.0
    timed = door.audio.transcriptions.create(
        model="whisper-1",
        file=("reply.wav", english, "audio/wav"),
        response_format="verbose_json",
        timestamp_granularities=["word"],
    )
    timed_words = timed.words or []
    words = [w.word.strip(" .,").lower() for w in timed_words]
    assert "green" in words and "boxes" in words, words
    starts = [w.start for w in timed_words]
    assert starts == sorted(starts) and all(w.end >= w.start for w in timed_words), timed_words

    chinese = door.audio.speech.create(
        model="kokoro-v1.0", voice="zf_xiaobei", input=CHINESE, response_format="wav"
    ).content
    heard = door.audio.transcriptions.create(
        model="whisper-1", file=("zh.wav", chinese, "audio/wav"), language="zh"
    )
    assert "天气" in heard.text, heard.text


def test_a_voice_no_worker_serves_is_a_400_naming_what_is_served(door: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        door.audio.speech.create(model="tts-1", voice="nobody_here", input="Hello.")
    error = refused.value.body
    assert isinstance(error, dict) and error.get("code") == "unknown_voice", error
    assert "af_heart" in str(error.get("message")), error
