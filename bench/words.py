"""Word timestamps: how far the word onsets heard are from the known ones, and what timing
the words costs.

The clip is `tests.support.word_clip`: three sentences (about 20 s, one whisper window)
spoken word by word in piper's voice with known gaps, so every onset is known. Each whisper
model transcribes it through the stage (`pipelines.speech.stt.transcribe`, one thread) with
and without word times, alternating, best of `ROUNDS`. The error is the mean absolute
difference of the onsets of the words heard as spoken (target <= 0.15 s); the cost, the ratio
of the two times (reported). Times are the process's CPU time (one onnxruntime thread runs
in it): on a machine shared with other work, wall time mostly measures the others.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.results import Entry, record
from pipelines.engines.registry import load_transcriber, load_tts
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from tests.support.word_clip import SENTENCE, WordClip, build_clip, onset_errors
from workers.core.settings import Settings
from workers.provisioning.models import prepare

MODELS = ("whisper-tiny.en", "whisper-base")
TEXT = " ".join(
    (
        SENTENCE,
        "She asked whether the invoice had been paid before the deadline",
        "Remember to back up the database before you upgrade the server",
    )
)
ROUNDS = 5
TARGET = "value <= 0.15"


def _entry(value: float, unit: str, target: str) -> Entry:
    return Entry(
        value=round(value, 4), unit=unit, baseline=None, ratio=None, target=target, better="lower"
    )


def _model(models: Path, name: str, clip: WordClip) -> None:
    config = SttConfig(models / name, threads=1, language="en")
    engine = load_transcriber(config)
    timed = replace(config, word_timestamps=True)
    plain_s, words_s = [], []
    for _ in range(ROUNDS):
        started = time.process_time()
        transcribe(clip.path, engine, config)
        plain_s.append(time.process_time() - started)
        started = time.process_time()
        result = transcribe(clip.path, engine, timed)
        words_s.append(time.process_time() - started)
    heard = list(result.words or ())
    errors = onset_errors(clip.words, heard)
    print(f"  {name}: {len(errors)}/{len(clip.words)} words heard as said: {result.text}")
    print(f"  cpu s, best of {ROUNDS}: {min(plain_s):.3f} without words, {min(words_s):.3f} with")
    print("  " + " ".join(f"{w.word}@{w.start:.2f}" for w in heard))
    slug = name.replace("-", "_").replace(".", "_")
    record(
        f"words_{slug}_onset_mae",
        _entry(float(np.mean(errors)) if errors else float("inf"), "s", TARGET),
    )
    record(
        f"words_{slug}_time_with_words_ratio", _entry(min(words_s) / min(plain_s), "x", "report")
    )


def run() -> None:
    home = Settings().home
    prepare(home, tier="default")
    prepare(home, tier="quality")
    models = home / "models"
    voice = load_tts(
        TtsConfig(models / "piper-en_US-joe-medium", threads=1, noise_scale=0.0, noise_scale_w=0.0)
    )
    with tempfile.TemporaryDirectory(prefix="bench-words-") as tmp:
        clip = build_clip(voice, Path(tmp) / "words.wav", TEXT)
        print(f"  clip: {clip.duration_s:.2f} s, {len(clip.words)} words")
        for name in MODELS:
            _model(models, name, clip)
