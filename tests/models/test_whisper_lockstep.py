"""Windows of real speech decoded in lockstep on the prepared whisper, against each window
decoded alone.

The int8 export quantises activations with one scale per tensor, computed as it runs: in
one encoder run of several windows they share that scale, so a near tie may come out
otherwise than alone (measured: of six 18 s windows of the bench's voice, two read a word
or a few otherwise, "a thousand" for "the thousand", "the garden is" for "the guard in
this"). Copies of one window share the scale of the window alone: there, every token must
be the same, which is what tells a batching fault from the scale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.engines.registry import load_transcriber, load_tts
from pipelines.engines.whisper import OrtWhisper
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.transcript import Segment
from tests.models.test_speech import LONG_CLIP, VOICE, WHISPER, wer, words

pytestmark = pytest.mark.models

Decoded = tuple[tuple[Segment, ...], float, str]


@pytest.fixture(scope="module")
def engine(models_home: Path) -> OrtWhisper:
    transcriber = load_transcriber(SttConfig(models_home / "models" / WHISPER, threads=2))
    assert isinstance(transcriber, OrtWhisper)
    return transcriber


@pytest.fixture(scope="module")
def windows(models_home: Path, engine: OrtWhisper) -> list[np.ndarray]:
    """Three windows of our voice, 18 s each (at whisper's 16 kHz)."""
    tts = load_tts(
        TtsConfig(models_home / "models" / VOICE, threads=2, noise_scale=0.0, noise_scale_w=0.0)
    )
    pause = np.zeros(int(0.4 * tts.sample_rate), np.float32)
    said = np.concatenate(
        [part for s in LONG_CLIP for part in (tts.synthesize(s).samples, pause)]
    )  # at the voice's rate, then linearly to 16 kHz
    step = round(len(said) / tts.sample_rate * engine.sample_rate)
    audio = np.interp(np.linspace(0, len(said) - 1, step), np.arange(len(said)), said).astype(
        np.float32
    )
    size = 18 * engine.sample_rate
    assert len(audio) >= 3 * size
    return [audio[i * size : (i + 1) * size] for i in range(3)]


def texts(decoded: list[Decoded]) -> list[str]:
    return [" ".join(p.text for p in pieces) for pieces, _, _ in decoded]


def assert_near(alone: list[str], together: list[str]) -> None:
    """Every window decoded, and together no worse against what was said than alone (the
    shared scale moves a near tie either way: measured here, batched was the better)."""
    said = words(" ".join(LONG_CLIP))
    assert all(
        len(words(both)) >= len(words(one)) // 2 for one, both in zip(alone, together, strict=True)
    )
    assert wer(said, words(" ".join(together))) <= wer(said, words(" ".join(alone))) + 0.02


def test_copies_of_a_window_decoded_together_say_exactly_what_it_says_alone(
    engine: OrtWhisper, windows: list[np.ndarray]
) -> None:
    alone = engine.recognise_window(windows[1])
    # Five: more than one encoder run takes (`_ENCODER_ROWS`), their outputs joined.
    together = engine.recognise_windows([windows[1]] * 5)
    assert together == [alone] * 5  # pieces, their tokens and figures, seconds used
    assert len(texts([alone])[0].split()) > 25


def test_three_windows_together_say_what_each_says_alone(
    engine: OrtWhisper, windows: list[np.ndarray]
) -> None:
    alone = texts([engine.recognise_window(w) for w in windows])
    together = texts(engine.recognise_windows(windows))
    assert_near(alone, together)


def test_windows_of_other_lengths_leave_the_batch_as_they_end(
    engine: OrtWhisper, windows: list[np.ndarray]
) -> None:
    # The 5 s window ends long before the others: it leaves the batch, they read on. Each
    # is padded to the longest, as whisper pads every window to 30 s.
    rate = engine.sample_rate
    cut = [windows[0][: 5 * rate], windows[1], windows[2][: 12 * rate]]
    together = texts(engine.recognise_windows(cut))
    alone = texts([engine.recognise_window(w) for w in cut])
    assert_near(alone, together)
    assert len(words(together[0])) < len(words(together[2])) < len(words(together[1]))
