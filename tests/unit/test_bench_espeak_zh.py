"""The quality bench's Mandarin for espeak-ng: pinyin syllables in ph_cmn phoneme names."""

from __future__ import annotations

import pytest

from bench.espeak_zh import espeak_phonemes, syllable

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("pinyin", "phonemes"),
    [
        ("bei3", "pei214"),  # unaspirated b is espeak's p; tone 3 is Chao 214
        ("jing1", "tS;iN55"),
        ("qu4", "tS;hy51"),  # after j/q/x the u is ü
        ("xuan2", "S;y&n35"),
        ("si4", "si[51"),  # the apical i after s
        ("shi2", "s.i.35"),  # the retroflex i after sh
        ("de5", "t@11"),  # neutral tone
        ("yue4", "yE51"),
        ("wen1", "u@n55"),
        ("lv4", "ly51"),
        ("er4", "@r51"),
    ],
)
def test_syllables_map_to_espeak_phonemes(pinyin: str, phonemes: str) -> None:
    assert syllable(pinyin) == phonemes


def test_what_is_not_pinyin_is_a_pause() -> None:
    assert syllable("hello") is None
    assert syllable("bei9") is None
    said = espeak_phonemes("北京，OK")
    assert said.startswith("[[pei214 tS;iN55 ") and said.endswith("]]")
    assert "OK" not in said
