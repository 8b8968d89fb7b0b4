"""A spoken clip whose word onsets are known: each word synthesised alone, trimmed to its
sound and laid down after a known gap, so the onset of every word is where it was placed.
Used by the word-timestamp tests and `bench.words` to score word times (mean absolute error
of the onsets of the words recognised)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.speech.audio import write_wav
from pipelines.speech.transcript import Word
from pipelines.speech.tts import TextToSpeech

SENTENCE = "Please send the quarterly report to the finance team in Rotterdam by Friday"
# Gaps before each word cycle through these (seconds): natural pauses, some longer.
GAPS = (0.5, 0.12, 0.2, 0.08, 0.3, 0.15, 0.1, 0.25, 0.18, 0.6, 0.1, 0.22, 0.14)
_SOUND = 0.01  # amplitude where a word's sound starts and ends in its own synthesis
_PAUSE = 0.2  # seconds of quiet between two sentences (a stop inside a word is shorter)


@dataclass(frozen=True, slots=True)
class WordClip:
    path: Path
    words: tuple[Word, ...]  # each word as placed: its onset and end (seconds)
    duration_s: float


def build_clip(tts: TextToSpeech, out: Path, sentence: str = SENTENCE) -> WordClip:
    """`sentence` word by word in `tts`'s voice, with `GAPS` of silence before each word and
    0.5 s after the last; written as a WAV at `out`."""
    rate = tts.sample_rate
    parts: list[NDArray[np.float32]] = []
    placed: list[Word] = []
    at = 0
    for number, word in enumerate(sentence.split()):
        speech = tts.synthesize(word)
        assert speech.samples is not None
        sound = _trimmed(speech.samples.astype(np.float32))
        gap = int(GAPS[number % len(GAPS)] * rate)
        parts += [np.zeros(gap, np.float32), sound]
        at += gap
        placed.append(Word(word, at / rate, (at + len(sound)) / rate))
        at += len(sound)
    parts.append(np.zeros(rate // 2, np.float32))
    samples = np.concatenate(parts)
    write_wav(out, samples, rate)
    return WordClip(out, tuple(placed), len(samples) / rate)


def build_sentences_clip(tts: TextToSpeech, out: Path, words: Sequence[str]) -> WordClip:
    """One-word sentences ("Apple. Banana. ...") synthesised as one text, so the voice
    pauses between them as it would; each word's onset is where sound begins after a pause
    (at least `_PAUSE` s below `_SOUND`), one per word (else the clip is refused)."""
    rate = tts.sample_rate
    speech = tts.synthesize(" ".join(f"{word}." for word in words))
    assert speech.samples is not None
    samples = speech.samples.astype(np.float32)
    loud = np.flatnonzero(np.abs(samples) >= _SOUND)
    starts = loud[np.flatnonzero(np.diff(loud, prepend=-rate) > _PAUSE * rate)]
    ends = np.append(loud[np.flatnonzero(np.diff(loud) > _PAUSE * rate)], loud[-1])
    assert len(starts) == len(words), (starts / rate, words)
    write_wav(out, samples, rate)
    placed = tuple(
        Word(word, float(start / rate), float(end / rate))
        for word, start, end in zip(words, starts, ends, strict=True)
    )
    return WordClip(out, placed, len(samples) / rate)


def _trimmed(samples: NDArray[np.float32]) -> NDArray[np.float32]:
    loud = np.flatnonzero(np.abs(samples) >= _SOUND)
    return samples[loud[0] : loud[-1] + 1] if len(loud) else samples


def _key(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


def onset_errors(known: Sequence[Word], heard: Sequence[Word]) -> list[float]:
    """|heard onset - known onset| of each word heard as spoken (matched in order by its
    letters, case and punctuation aside); words misheard are left out."""
    matcher = difflib.SequenceMatcher(
        a=[_key(w.word) for w in known], b=[_key(w.word) for w in heard], autojunk=False
    )
    errors: list[float] = []
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            errors.append(abs(heard[block.b + k].start - known[block.a + k].start))
    return errors
