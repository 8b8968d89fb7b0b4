"""The STT probe's voice and phrase: in a language the recognizer takes and a prepared voice
speaks, the configured voice first."""

from __future__ import annotations

import pytest

from workers.core.catalog import Voice
from workers.jobs.probes import PHRASES, probe_speech

pytestmark = pytest.mark.unit

KOKORO = [
    Voice("af_heart", "en-us", "kokoro-v1.0"),
    Voice("bf_emma", "en-gb", "kokoro-v1.0"),
    Voice("zf_xiaobei", "zh", "kokoro-v1.0"),
]
PIPER = [Voice("piper-en_US-joe-medium", "en-us", "piper-en_US-joe-medium")]


def test_a_chinese_voice_with_a_multilingual_recognizer_speaks_chinese() -> None:
    chosen = probe_speech(KOKORO + PIPER, "zf_xiaobei", "")
    assert chosen is not None
    assert (chosen.voice, chosen.language, chosen.phrase) == ("zf_xiaobei", "zh", PHRASES["zh"][0])
    assert chosen.passes("你好,这是一个测试。") and chosen.passes("你好,這是一個測試。")


def test_a_chinese_voice_with_an_english_only_recognizer_lends_an_english_voice() -> None:
    chosen = probe_speech(PIPER + KOKORO, "zf_xiaobei", "en")
    assert chosen is not None
    # the configured voice's own model first (Kokoro), though piper's folder comes first
    assert (chosen.voice, chosen.language) == ("af_heart", "en")
    assert chosen.passes("Hello, this is a test.") and not chosen.passes("このタスは")


def test_a_recognizer_held_to_chinese_is_probed_by_a_chinese_voice() -> None:
    chosen = probe_speech(KOKORO + PIPER, "piper-en_US-joe-medium", "zh")
    assert chosen is not None and (chosen.voice, chosen.language) == ("zf_xiaobei", "zh")


def test_an_english_voice_keeps_the_english_phrase() -> None:
    chosen = probe_speech(KOKORO + PIPER, "bf_emma", "")
    assert chosen is not None and (chosen.voice, chosen.language) == ("bf_emma", "en")


def test_a_voice_whose_folder_names_no_language_is_taken_as_english() -> None:
    chosen = probe_speech([Voice("my-voice", "", "my-voice")], "my-voice", "en")
    assert chosen is not None and chosen.voice == "my-voice"


def test_no_shared_language_probes_the_recognizer_alone() -> None:
    assert probe_speech([Voice("zf_xiaobei", "zh", "kokoro-v1.0")], "zf_xiaobei", "en") is None
    assert probe_speech(KOKORO, "af_heart", "fr") is None
    assert probe_speech([], "piper-en_US-joe-medium", "de") is None
