"""Phonemes in the alphabet Kokoro v1.0 was trained on, for English and Chinese voices.

English: espeak-ng IPA (the `phonemes` extra) with the few rewrites Kokoro's own web
runtime applies to espeak output. Chinese: misaki's pinyin -> IPA transcription with tone
arrows (the `chinese` extra: misaki, jieba, pypinyin), the transcription Kokoro's Chinese
voices were trained with; Latin words inside Chinese text go through espeak when it is
installed. Symbols the voice's vocabulary lacks are dropped here, not by sherpa.
The only module that imports misaki or jieba, lazily.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from pipelines.engines.phonemizer import EspeakPhonemizer
from pipelines.errors import ConfigError

# Rewrites of espeak's IPA toward Kokoro's (each a plain character or a fixed lookaround).
_EN_FIXES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        ("ʲ", "j"),
        ("r", "ɹ"),
        ("x", "k"),
        ("ɬ", "l"),
        ("(?<=[a-zɹː])(?=hˈʌndɹɪd)", " "),
        (' z(?=[;:,.!?¡¿—…"«»“” ]|$)', "z"),
    )
)
_ESPEAK_VOICES = {"en-gb": "en"}
_HAN_OR_NOT = re.compile(r"[\u4e00-\u9fff]+|[^\u4e00-\u9fff]+")
_LATIN = re.compile(r"[A-Za-z]")
_ZH_PUNCT = str.maketrans(
    {
        "、": ", ",
        "，": ", ",
        "。": ". ",
        "．": ". ",
        "！": "! ",
        "：": ": ",
        "；": "; ",
        "？": "? ",
        "（": " (",
        "）": ") ",
        "《": " “",
        "》": "” ",
        "「": " “",
        "」": "” ",
    }
)


def _keep(vocab: Iterable[str]) -> Callable[[str], str]:
    allowed = frozenset(vocab)

    def keep(text: str) -> str:
        return " ".join("".join(ch for ch in text if ch in allowed).split())

    return keep


class KokoroEnglish:
    """`Phonemizer` for Kokoro's English voices (``en-us`` or ``en-gb``)."""

    def __init__(self, vocab: Iterable[str], language: str = "en-us") -> None:
        # espeak-ng names British English "en" (it has no voice called en-gb).
        self._espeak = EspeakPhonemizer(_ESPEAK_VOICES.get(language, language))
        self._keep = _keep(vocab)
        self._american = language == "en-us"

    def phonemize(self, text: str) -> list[str]:
        out = []
        for clause in self._espeak.phonemize(text):
            for pattern, repl in _EN_FIXES:
                clause = pattern.sub(repl, clause)
            if self._american:
                clause = clause.replace("nˈaɪnti", "nˈaɪndi")
            kept = self._keep(clause)
            if kept:
                out.append(kept)
        # One sentence, one string: Kokoro reads punctuation as pauses itself.
        return [" ".join(out)] if out else []


def _load_misaki() -> Any:
    try:
        module = importlib.import_module("misaki.zh")
    except ImportError as exc:
        raise ConfigError(
            "Chinese voices need misaki's Chinese transcription: install the 'chinese' extra"
            " (misaki[zh]: jieba, pypinyin, cn2an)"
        ) from exc
    logging.getLogger("jieba").setLevel(logging.WARNING)
    importlib.import_module("jieba").setLogLevel(logging.WARNING)
    return module


class KokoroChinese:
    """`Phonemizer` for Kokoro's Chinese voices: jieba words -> pinyin -> IPA with tones."""

    def __init__(self, vocab: Iterable[str]) -> None:
        misaki_zh = _load_misaki()
        self._g2p = misaki_zh.ZHG2P
        self._jieba = importlib.import_module("jieba")
        self._keep = _keep(vocab)
        try:
            self._english: EspeakPhonemizer | None = EspeakPhonemizer("en-us")
        except ConfigError:
            self._english = None
        self._jieba.initialize()

    def phonemize(self, text: str) -> list[str]:
        text = text.translate(_ZH_PUNCT)
        parts: list[str] = []
        for run in _HAN_OR_NOT.findall(text):
            if "\u4e00" <= run[0] <= "\u9fff":
                words = self._jieba.lcut(run, cut_all=False)
                parts.append(" ".join(self._g2p.word2ipa(w) for w in words))
            elif _LATIN.search(run) and self._english is not None:
                parts.extend(self._english.phonemize(run))
            else:
                parts.append(run)
        kept = self._keep("".join(parts).replace(chr(815), ""))
        return [kept] if kept else []
