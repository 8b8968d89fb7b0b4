"""Honest transcripts on the real models: silence of any length is no speech (and whisper's
own no-speech probability says so), speech after a long silence is timed where it starts in
every format, and verbose_json carries whisper's real decoding figures (Mandarin's script:
`test_stt_chinese`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openai import OpenAI

from pipelines.engines.registry import load_transcriber, load_tts, load_vad
from pipelines.engines.whisper import OrtWhisper
from pipelines.speech.audio import iter_audio, write_wav
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from tests.support.serve import speech_door

pytestmark = pytest.mark.models

RATE = 16_000
SENTENCE = "Please send the quarterly report to the finance team by Friday."
LEAD_S = 8.0


@pytest.fixture(scope="module")
def tiny(models_home: Path) -> tuple[SttConfig, OrtWhisper]:
    config = SttConfig(
        models_home / "models" / "whisper-tiny.en", vad_model=models_home / "models" / "silero-vad"
    )
    engine = load_transcriber(config)
    assert isinstance(engine, OrtWhisper)
    return config, engine


@pytest.fixture(scope="module")
def late_speech(models_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s of digital silence, then a sentence in piper's voice (16 kHz WAV)."""
    folder = tmp_path_factory.mktemp("late")
    voice = load_tts(
        TtsConfig(
            models_home / "models" / "piper-en_US-joe-medium", noise_scale=0.0, noise_scale_w=0.0
        )
    )
    spoken = voice.synthesize_to_file(SENTENCE, folder / "said.wav", "wav")
    assert spoken.path is not None
    speech = np.concatenate(list(iter_audio(spoken.path, RATE, SttConfig(folder).limits)))
    clip = np.concatenate([np.zeros(int(LEAD_S * RATE), np.float32), speech])
    return write_wav(folder / "late.wav", clip, RATE)


def silence(seconds: int, folder: Path) -> Path:
    return write_wav(folder / f"silence-{seconds}.wav", np.zeros(seconds * RATE, np.float32), RATE)


@pytest.mark.parametrize("seconds", [5, 8, 12])
@pytest.mark.parametrize("vad", [True, False])
def test_silence_of_any_length_is_no_speech(
    tiny: tuple[SttConfig, OrtWhisper], tmp_path: Path, seconds: int, vad: bool
) -> None:
    config, engine = tiny
    if not vad:
        config = SttConfig(config.model_dir)
    result = transcribe(silence(seconds, tmp_path), engine, config, load_vad(config))
    assert (result.text, result.segments, result.note) == ("", (), "no speech detected")


def test_whisper_itself_finds_no_speech_in_silence(tiny: tuple[SttConfig, OrtWhisper]) -> None:
    """The probability of <|nospeech|> at the first step, as whisper computes it: high on
    silence, low on speech (the check that decides a window is silent uses it)."""
    _config, engine = tiny
    for seconds in (5, 8, 12):
        quiet = engine.decode_window(np.zeros(seconds * RATE, np.float32))
        assert quiet.no_speech_prob > 0.6, seconds


def test_speech_after_silence_starts_where_it_is_said(
    tiny: tuple[SttConfig, OrtWhisper], late_speech: Path
) -> None:
    config, engine = tiny
    for detector in (load_vad(config), None):  # silero's regions, or digital silence skipped
        result = transcribe(late_speech, engine, config, detector)
        first = result.segments[0]
        assert first.start == pytest.approx(LEAD_S, abs=0.5), result.segments
        assert "quarterly report" in result.text.lower()
        assert first.tokens and first.avg_logprob < 0 and 0 < first.no_speech_prob < 0.6
        assert first.compression_ratio > 0 and first.seek == pytest.approx(first.start * 100, 1)


@pytest.fixture(scope="module")
def stt_api(
    tmp_path_factory: pytest.TempPathFactory, broker: Any, models_home: Path
) -> Iterator[OpenAI]:
    """serve with one tiny.en stt worker, for the module."""
    home = tmp_path_factory.mktemp("honest") / "home"
    with speech_door(home, broker, models_home, {"stt": 1}) as (_, _, api):
        yield api


def _cue_start(cues: str) -> float:
    found = re.search(r"(\d\d):(\d\d):(\d\d)[,.](\d\d\d) -->", cues)
    assert found, cues
    h, m, s, ms = (int(g) for g in found.groups())
    return h * 3600 + m * 60 + s + ms / 1000


def _upload(api: OpenAI, path: Path, fmt: str) -> Any:
    options: dict[str, Any] = {"response_format": fmt}
    return api.audio.transcriptions.create(
        model="whisper-1", file=(path.name, path.read_bytes()), **options
    )


def test_every_format_times_speech_after_silence_where_it_starts(
    stt_api: OpenAI, late_speech: Path
) -> None:
    verbose = _upload(stt_api, late_speech, "verbose_json")
    first = verbose.segments[0]
    assert first.start == pytest.approx(LEAD_S, abs=0.5)
    # whisper's decoding figures, not placeholders
    assert first.tokens and all(isinstance(t, int) for t in first.tokens)
    assert first.seek == pytest.approx(first.start * 100, abs=1)
    assert -1.0 < first.avg_logprob < 0.0
    assert 0.0 < first.compression_ratio < 2.4
    assert 0.0 < first.no_speech_prob < 0.6
    assert _cue_start(_upload(stt_api, late_speech, "srt")) == pytest.approx(LEAD_S, abs=0.5)
    assert _cue_start(_upload(stt_api, late_speech, "vtt")) == pytest.approx(LEAD_S, abs=0.5)


def test_silence_through_the_api_is_an_empty_transcript(stt_api: OpenAI, tmp_path: Path) -> None:
    for seconds in (5, 8, 12):
        verbose = _upload(stt_api, silence(seconds, tmp_path), "verbose_json")
        assert (verbose.text, verbose.segments) == ("", []), seconds
        assert _upload(stt_api, silence(seconds, tmp_path), "text") == ""
