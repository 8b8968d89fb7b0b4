"""A whisper folder exported before word timestamps (no `alignment` output, no
`alignment_heads` metadata: made here from today's export with `tests.support.onnx_edit`)
still loads and transcribes; asked for words, the stage says why it cannot and the HTTP door
answers 400 `word_timestamps_unsupported`. Its own module: its door must not share the broker
with another module's workers."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openai import BadRequestError, OpenAI

from pipelines.engines.registry import load_transcriber, load_tts
from pipelines.engines.whisper import OrtWhisper
from pipelines.errors import ConfigError
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from tests.support.onnx_edit import drop_metadata, drop_output
from tests.support.serve import speech_door
from tests.support.word_clip import WordClip, build_clip

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def clip(models_home: Path, tmp_path_factory: pytest.TempPathFactory) -> WordClip:
    voice = load_tts(
        TtsConfig(
            models_home / "models" / "piper-en_US-joe-medium", noise_scale=0.0, noise_scale_w=0.0
        )
    )
    return build_clip(voice, tmp_path_factory.mktemp("words") / "words.wav")


def _transcribe(api: OpenAI, clip: WordClip, fmt: str, granularities: list[str]) -> Any:
    options: dict[str, Any] = {"response_format": fmt, "timestamp_granularities": granularities}
    return api.audio.transcriptions.create(
        model="whisper-1", file=(clip.path.name, clip.path.read_bytes()), **options
    )


@pytest.fixture(scope="module")
def old_export(models_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """whisper-tiny.en as exports before word timestamps wrote it: no `alignment` output,
    no `alignment_heads` metadata."""
    source = models_home / "models" / "whisper-tiny.en"
    folder = tmp_path_factory.mktemp("old") / "whisper-tiny.en-old"
    shutil.copytree(source, folder)
    drop_output(source / "decoder.int8.onnx", folder / "decoder.int8.onnx", "alignment")
    drop_metadata(source / "encoder.int8.onnx", folder / "encoder.int8.onnx", "alignment_heads")
    (folder / "manifest.json").unlink()
    return folder


def test_an_export_without_alignment_still_transcribes_and_says_why_no_words(
    old_export: Path, clip: WordClip
) -> None:
    config = SttConfig(old_export)
    engine = load_transcriber(config)
    assert isinstance(engine, OrtWhisper) and not engine.word_timestamps
    plain = transcribe(clip.path, engine, config)
    assert "quarterly report" in plain.text.lower() and plain.words is None
    with pytest.raises(ConfigError, match=r"cannot time words.*models prepare"):
        transcribe(clip.path, engine, replace(config, word_timestamps=True))


def test_the_door_refuses_words_from_an_old_export(
    tmp_path: Path, broker: Any, models_home: Path, old_export: Path, clip: WordClip
) -> None:
    env = {"MCP_MEDIA_STT__MODEL_DIR": str(old_export)}
    with speech_door(tmp_path / "home", broker, models_home, {"stt": 1}, **env) as (_, _, api):
        with pytest.raises(BadRequestError) as refused:
            _transcribe(api, clip, "verbose_json", ["word"])
        assert refused.value.code == "word_timestamps_unsupported"
        assert "models prepare" in refused.value.message
        assert "quarterly report" in _transcribe(api, clip, "verbose_json", ["segment"]).text
