"""The Wyoming door on the quality tier (multilingual whisper base, Kokoro v1.0): describe
offers whisper's languages and each voice's own; a voice chosen by language; the
`transcribe` language passed to the job in two languages (Chinese and English), and a
forced language answered by its own job, not the detected one's result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from wyoming.asr import Transcript
from wyoming.info import Info
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.models.test_wyoming import audio_of, describe, heard, speak, transcribe
from tests.support.cluster import Cluster
from tests.support.scoring import cer
from tests.support.wyoming_door import WyomingDoor, wyoming
from workers.provisioning.models import ModelInfo

pytestmark = pytest.mark.models

CHINESE = "请把季度报告在星期五之前发给财务部。明天下午三点我们开会。"
ENGLISH = "Please send the quarterly report before Friday."
QUALITY_ENV = {"MCP_MEDIA_STT__MODEL": "whisper-base", "MCP_MEDIA_TTS__VOICE": "kokoro-v1.0"}


@pytest.fixture
def door(
    cluster: Cluster, models_home: Path, quality_models: list[ModelInfo]
) -> Iterator[WyomingDoor]:
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    cluster.env_vars.update(QUALITY_ENV)
    cluster.start_worker("tts", concurrency=1)
    cluster.start_worker("stt", concurrency=1)
    with wyoming(cluster) as served:
        yield served


def test_two_languages_spoken_and_transcribed_as_asked(door: WyomingDoor) -> None:
    info: Info = describe(door)
    (model,) = info.asr[0].models
    assert model.name == "whisper-base" and {"en", "zh", "de"} <= set(model.languages)
    voices = {voice.name: voice.languages for voice in info.tts[0].voices}
    assert voices["zf_xiaobei"] == ["zh"] and voices["af_heart"] == ["en_US"]

    chinese = audio_of(speak(door, [Synthesize(CHINESE, SynthesizeVoice(language="zh")).event()]))
    said = Transcript.from_event(transcribe(door, chinese, 24_000, 2, 1, "zh"))
    assert said.language == "zh" and cer(CHINESE, said.text) <= 0.35, said.text
    forced = Transcript.from_event(transcribe(door, chinese, 24_000, 2, 1, "en"))
    assert forced.language == "en" and forced.text != said.text

    english = audio_of(speak(door, [Synthesize(ENGLISH, SynthesizeVoice("af_heart")).event()]))
    heard_en = Transcript.from_event(transcribe(door, english, 24_000, 2, 1, "en"))
    assert heard_en.language == "en" and heard(ENGLISH, heard_en.text) >= 0.8, heard_en.text
