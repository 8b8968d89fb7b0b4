"""The quality tier on the real models: multilingual whisper base and Kokoro v1.0.

A Chinese reply is spoken as an Ogg/Opus voice note and transcribed back in Chinese, the
language detected and reported; an English round trip; per-request language and voice
through real workers; the manifests say where each file came from and under which licence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.peers import wer
from pipelines.engines.registry import chinese_writer, load_transcriber, load_tts, load_vad
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import Transcriber, transcribe
from pipelines.speech.tts import TextToSpeech, VoiceError
from tests.support.cluster import Cluster
from tests.support.scoring import cer
from workers.provisioning.models import KOKORO_V1, TIERS, ModelInfo

pytestmark = pytest.mark.models

CHINESE = "请把季度报告在星期五之前发给财务部。明天下午三点我们开会。"
ENGLISH = "Please send the quarterly report to the finance team in Rotterdam by Friday."
QUALITY_ENV = {"MCP_MEDIA_STT__MODEL": "whisper-base", "MCP_MEDIA_TTS__VOICE": "kokoro-v1.0"}


@pytest.fixture(scope="module")
def kokoro(models_home: Path, quality_models: list[ModelInfo]) -> TextToSpeech:
    return load_tts(TtsConfig(models_home / "models" / "kokoro-v1.0"))


@pytest.fixture(scope="module")
def stt_config(models_home: Path, quality_models: list[ModelInfo]) -> SttConfig:
    return SttConfig(
        models_home / "models" / "whisper-base",
        vad_model=models_home / "models" / "silero-vad",
    )


@pytest.fixture(scope="module")
def whisper_base(stt_config: SttConfig) -> Transcriber:
    return load_transcriber(stt_config)


def test_the_quality_tier_is_built_with_sources_licences_and_voices(
    models_home: Path, quality_models: list[ModelInfo]
) -> None:
    assert [info.name for info in quality_models] == list(TIERS["quality"])
    kokoro = json.loads((models_home / "models" / "kokoro-v1.0" / "manifest.json").read_text())
    assert kokoro["licence"] == "Apache-2.0"
    assert [s["requirement"] for s in kokoro["sources"]] == [
        s.requirement for s in KOKORO_V1.sources
    ]
    assert all(len(s["sha256"]) == 64 for s in kokoro["sources"])
    languages = {v["name"]: v["language"] for v in kokoro["voices"]}
    assert languages["zf_xiaobei"] == "zh" and languages["af_heart"] == "en-us"
    # Every int8 convolution became a float one on the same weights, then a 2-D one; the
    # build's checks bounded how far the output moved (the round trips below hear it).
    layout = kokoro["conversion"]
    assert layout["convolutions_dequantized"] == 87 and layout["convolutions_2d"] >= 87
    assert layout["float_vs_int8"]["length_ratio"] == pytest.approx(1.0, abs=0.05)
    assert layout["spectral_snr_db_2d"] >= 25
    whisper = json.loads((models_home / "models" / "whisper-base" / "manifest.json").read_text())
    assert whisper["licence"] == "MIT" and len(whisper["sources"]) == 2
    assert whisper["conversion"]["dims"]["n_vocab"] == 51865  # multilingual vocabulary


def test_a_chinese_voice_note_is_transcribed_back_in_chinese(
    kokoro: TextToSpeech, whisper_base: Transcriber, stt_config: SttConfig, tmp_path: Path
) -> None:
    voice = kokoro.for_voice("zf_xiaobei")
    note = voice.synthesize_to_file(CHINESE, tmp_path / "reply.ogg", "ogg")
    assert note.path is not None and note.path.read_bytes()[:4] == b"OggS"
    assert note.sentences == 2 and note.duration_s > 3.0
    simplified = chinese_writer(stt_config.chinese_script)  # what users receive
    transcript = transcribe(
        note.path, whisper_base, stt_config, load_vad(stt_config), chinese=simplified
    )
    assert transcript.language == "zh"  # detected: nothing said which language
    assert cer(CHINESE, transcript.text) <= 0.35, transcript.text


def test_an_english_round_trip_on_the_quality_tier(
    kokoro: TextToSpeech, whisper_base: Transcriber, stt_config: SttConfig, tmp_path: Path
) -> None:
    note = kokoro.for_voice("af_heart").synthesize_to_file(ENGLISH, tmp_path / "en.ogg", "ogg")
    assert note.path is not None
    transcript = transcribe(note.path, whisper_base, stt_config)
    assert transcript.language == "en"
    assert wer(ENGLISH, transcript.text) <= 0.1, transcript.text


def test_a_given_language_is_used_and_reported(
    kokoro: TextToSpeech, whisper_base: Transcriber, stt_config: SttConfig, tmp_path: Path
) -> None:
    note = kokoro.for_voice("af_heart").synthesize_to_file(ENGLISH, tmp_path / "en.wav", "wav")
    assert note.path is not None
    detected = transcribe(note.path, whisper_base, stt_config)
    forced = transcribe(note.path, whisper_base, replace(stt_config, language="zh"))
    assert (detected.language, forced.language) == ("en", "zh")
    assert forced.text and forced.text != detected.text


def test_a_voice_the_model_lacks_is_a_specific_error(kokoro: TextToSpeech) -> None:
    with pytest.raises(VoiceError, match=r"no voice 'xx_nobody' in kokoro-v1\.0"):
        kokoro.for_voice("xx_nobody")


@pytest.fixture
def quality_cluster(
    cluster: Cluster, models_home: Path, quality_models: list[ModelInfo]
) -> Iterator[Cluster]:
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    cluster.env_vars.update(QUALITY_ENV)  # workers and CLI calls alike
    yield cluster


def test_language_and_voice_per_request_through_workers(
    quality_cluster: Cluster, tmp_path: Path
) -> None:
    quality_cluster.start_worker("tts", concurrency=1)
    quality_cluster.start_worker("stt", concurrency=1)
    spoken = quality_cluster.cli_json("speak", CHINESE, "--voice", "zf_xiaobei", "--wait", "600")
    assert spoken["status"] == "done" and spoken["format"] == "ogg"
    assert spoken["media_tag"].startswith("[[audio_as_voice]]\nMEDIA:")
    heard = quality_cluster.cli_json("transcribe", spoken["path"], "--wait", "600")
    assert heard["status"] == "done" and heard["language"] == "zh"
    assert cer(CHINESE, heard["text"]) <= 0.35, heard["text"]
    forced = quality_cluster.cli_json(
        "transcribe", spoken["path"], "--language", "en", "--wait", "600"
    )
    assert forced["status"] == "done" and forced["language"] == "en"
    assert forced["text"] != heard["text"]  # its own result, not the detected one again
    refused = quality_cluster.cli("speak", "hello", "--voice", "nobody_here", "--wait", "600")
    assert refused.returncode != 0 and "unknown voice 'nobody_here'" in refused.stderr


def test_speak_by_cli_takes_openai_names_and_kokoro_blends(quality_cluster: Cluster) -> None:
    def spoken(voice: str) -> bytes:
        said = quality_cluster.cli_json("speak", "Good morning.", "--voice", voice, "--inline")
        assert said["status"] == "done", said
        return Path(said["path"]).read_bytes()

    blend = spoken("af_bella(2) + af_heart(1)")
    assert len({blend, spoken("af_bella"), spoken("af_heart"), spoken("alloy")}) == 4
    refused = quality_cluster.cli("speak", "Hi.", "--voice", "af_bella+zf_xiaobei", "--inline")
    assert refused.returncode == 2 and "mixes languages" in refused.stderr
