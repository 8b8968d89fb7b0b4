"""Mandarin for espeak-ng as phonemes: the quality bench's second Chinese voice.

Debian's espeak-ng 1.51 reads a Chinese character as its pinyin and speaks the tone digit as
an English number (`espeak-ng -v cmn -x 北` gives `(en)beI55Tr'i:55(cmn)`, "bei three"),
so whisper hears strings of digits. Its phoneme input (``[[...]]``) does take Mandarin: this
module writes each character's pinyin (pypinyin, from the `chinese` extra) in the phoneme
names of espeak-ng's ``ph_cmn`` table, one syllable per word with its Chao tone number, as
the upstream ``cmn_rules`` map pinyin. A syllable it cannot map becomes a pause.
"""

from __future__ import annotations

import re

_INITIALS = {
    "b": "p", "p": "ph", "m": "m", "f": "f", "d": "t", "t": "th", "n": "n", "l": "l",
    "g": "k", "k": "kh", "h": "x", "j": "tS;", "q": "tS;h", "x": "S;", "zh": "ts.",
    "ch": "ts.h", "sh": "s.", "r": "z.", "z": "ts", "c": "tsh", "s": "s",
}  # fmt: skip
_FINALS = {
    "a": "A", "ai": "ai", "ao": "Au", "an": "an", "ang": "AN", "o": "o", "ou": "ou",
    "ong": "ong", "e": "o-", "ei": "ei", "en": "@n", "eng": "@N", "er": "@r", "i": "i",
    "ia": "iA", "ian": "iEn", "iang": "iAN", "iao": "iAu", "ie": "iE", "in": "in", "ing": "iN",
    "iong": "ioN", "iu": "iou", "u": "u", "ua": "uA", "uai": "uai", "uan": "uan",
    "uang": "uAN", "ui": "uei", "un": "u@n", "uo": "uo", "v": "y", "ve": "yE", "van": "y&n",
    "vn": "y@n",
}  # fmt: skip
# Syllables written with y/w and no initial.
_WHOLE = {
    "ya": "iA", "yan": "iEn", "yang": "iAN", "yao": "iAu", "ye": "iE", "yi": "i", "yin": "in",
    "ying": "iN", "yo": "io", "yong": "ioN", "you": "iou", "yu": "y", "yue": "yE",
    "yuan": "y&n", "yun": "y@n", "wa": "uA", "wai": "uai", "wan": "uan", "wang": "uAN",
    "wei": "uei", "wen": "u@n", "weng": "u@N", "wo": "uo", "wu": "u",
}  # fmt: skip
_TONES = {"1": "55", "2": "35", "3": "214", "4": "51", "5": "11"}
_SYLLABLE = re.compile(r"([a-zv]+)([1-5]?)")


def syllable(pinyin: str) -> str | None:
    """espeak-ng's phonemes for one pinyin syllable with a tone digit ("bei3" -> "pei214")."""
    found = _SYLLABLE.fullmatch(pinyin.replace("ü", "v"))
    if found is None:
        return None
    body, tone = found.group(1), _TONES[found.group(2) or "5"]
    if body in _WHOLE:
        return _WHOLE[body] + tone
    initial = next((body[:n] for n in (2, 1) if body[:n] in _INITIALS), "")
    final = body[len(initial) :]
    if initial in ("j", "q", "x") and final.startswith("u"):
        final = "v" + final[1:]  # ju, que, xuan: the u is ü
    if final == "i" and initial in ("z", "c", "s"):
        sound: str | None = "i["
    elif final == "i" and initial in ("zh", "ch", "sh", "r"):
        sound = "i."
    elif final == "e" and initial in ("d", "t", "n", "l"):
        sound = "@"
    else:
        sound = _FINALS.get(final)
    return None if sound is None else _INITIALS.get(initial, "") + sound + tone


def espeak_phonemes(text: str) -> str:
    """`text` as an espeak-ng ``[[...]]`` phoneme string for the ``cmn`` voice."""
    from pypinyin import Style, lazy_pinyin

    syllables = lazy_pinyin(
        text, style=Style.TONE3, neutral_tone_with_five=True, errors=lambda _: " "
    )
    return "[[" + " ".join(syllable(s) or " " for s in syllables) + "]]"
