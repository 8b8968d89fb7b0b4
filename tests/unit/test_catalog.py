"""The catalog a door reads from the workers' announcements: what parses, what is left out,
and what a door accepts when nothing (or something odd) was announced."""

from __future__ import annotations

from typing import Any

import pytest

from workers.core.catalog import Catalog, SttModel, TtsModel, Voice, VoiceNotFound

pytestmark = pytest.mark.unit

TTS: dict[str, Any] = {
    "version": "abc",
    "voice": "kokoro-v1.0",
    "voices": [
        {"id": "af_heart", "name": "af_heart", "language": "en-us", "model": "kokoro-v1.0"},
        {"id": "zf_xiaobei", "name": "zf_xiaobei", "language": "zh", "model": "kokoro-v1.0"},
        {"id": 7, "model": "kokoro-v1.0"},  # not a name: left out
        "af_sky",  # not an entry: left out
    ],
    "models": [{"id": "kokoro-v1.0", "engine": "native"}, {"engine": "sherpa"}],
}
STT = {"version": "def", "model": "whisper-base", "multilingual": True, "word_timestamps": True}


def test_what_parses_is_kept_and_nothing_is_guessed() -> None:
    found = Catalog.announced(TTS, STT)
    assert found.voices == (
        Voice("af_heart", "en-us", "kokoro-v1.0"),
        Voice("zf_xiaobei", "zh", "kokoro-v1.0"),
    )
    assert found.tts_models == (TtsModel("kokoro-v1.0", "native"),)
    assert found.stt == SttModel("whisper-base", True, True)
    assert found.stt.takes("zh")
    english = Catalog.announced(None, {"model": "whisper-tiny.en", "multilingual": "yes"})
    assert english.stt is not None and not english.stt.multilingual  # only `true` is true
    assert not english.stt.takes("zh") and english.stt.takes("en")
    assert Catalog.announced(None, {"multilingual": True}).stt is None  # no model named


def test_a_door_accepts_what_the_workers_serve_and_names_them_when_refusing() -> None:
    found = Catalog.announced(TTS, STT)
    assert found.resolve_voice("zf_xiaobei") == "zf_xiaobei"
    assert found.resolve_voice("alloy") == "kokoro-v1.0"  # the workers' voice speaks English
    assert found.resolve_voice("alloy", mapped={"alloy": "af_heart"}) == "af_heart"
    assert found.model_of("af_heart+zf_xiaobei") == TtsModel("kokoro-v1.0", "native")
    piper = Catalog.announced(
        {
            "voice": "piper-en_US-joe-medium",
            "voices": [{"id": "piper-en_US-joe-medium", "model": "piper-en_US-joe-medium"}],
            "models": [{"id": "piper-en_US-joe-medium", "engine": "native"}],
        },
        None,
    )
    # a folder's name reads like a blend (a dash subtracts a voice): the name itself first
    assert piper.model_of("piper-en_US-joe-medium") == TtsModel("piper-en_US-joe-medium", "native")
    with pytest.raises(VoiceNotFound, match="af_heart, zf_xiaobei") as refused:
        found.resolve_voice("nobody")
    assert "such as" not in str(refused.value)  # no two served voices of one language blend
    bella = {"id": "af_bella", "language": "en-us", "model": "kokoro-v1.0"}
    two = Catalog.announced({**TTS, "voices": [*TTS["voices"], bella]}, STT)
    with pytest.raises(VoiceNotFound, match=r"such as af_heart\(2\)\+af_bella\(1\)"):
        two.resolve_voice("nobody")


def test_with_nothing_announced_names_go_on_to_the_worker() -> None:
    nothing = Catalog.announced(None, None, voice="piper-en_US-joe-medium")
    assert nothing.voices == () and nothing.stt is None
    assert nothing.resolve_voice("af_heart") == "af_heart"
    assert nothing.resolve_voice("alloy") == "piper-en_US-joe-medium"
    assert nothing.model_of("af_heart") is None
