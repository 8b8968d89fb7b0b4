"""silero scoring a live stream on the prepared model: the same probabilities however the audio
is cut into pieces, in both model layouts, and speech found where it is at another rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.engines.silero_stream import SileroScoring
from pipelines.speech.vad import validate_vad_model
from tests.models.test_silero_vad import RATE, clip  # noqa: F401  (the fixture)

pytestmark = pytest.mark.models


def pcm16(audio: np.ndarray) -> bytes:
    return bytes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())


def scored(scoring: SileroScoring, data: bytes, rate: int, pieces: list[int]) -> list[float]:
    stream = scoring.open(rate)
    found: list[float] = []
    at = 0
    for size in pieces:
        found += stream.feed(data[at : at + size])
        at += size
    return found + stream.feed(data[at:])


def test_pieces_of_any_size_score_alike_in_both_layouts(
    models_home: Path,
    clip: tuple[np.ndarray, list[tuple[float, float]]],  # noqa: F811
) -> None:
    audio, _ = clip
    data = pcm16(audio)
    folder = models_home / "models" / "silero-vad"
    sequence = SileroScoring(folder / "silero_vad_16k_sequence.onnx")
    streaming = SileroScoring(folder / "silero_vad.onnx")
    whole = scored(sequence, data, RATE, [])
    odd = scored(sequence, data, RATE, [1, 333, 1023, 7, 4000] * 40)  # half samples too
    assert len(whole) == len(odd) == len(audio) // 512
    assert np.allclose(whole, odd, atol=1e-4)
    assert np.allclose(whole, scored(streaming, data, RATE, [3200] * 50), atol=1e-3)


def test_speech_at_24k_is_found_where_it_is_spoken(
    models_home: Path,
    clip: tuple[np.ndarray, list[tuple[float, float]]],  # noqa: F811
) -> None:
    audio, spoken = clip
    at_24k = np.interp(np.arange(len(audio) * 3 // 2) / 1.5, np.arange(len(audio)), audio)
    scoring = SileroScoring(validate_vad_model(models_home / "models" / "silero-vad"))
    probabilities = scored(scoring, pcm16(at_24k), 24_000, [4800] * 200)  # 100 ms pieces
    assert abs(len(probabilities) - len(audio) // 512) <= 1
    window_s = 512 / RATE
    for begins, ends in spoken:
        inside = probabilities[int(begins / window_s) + 3 : int(ends / window_s) - 3]
        assert max(inside) >= 0.5
    silent = [p for i, p in enumerate(probabilities)
              if all(not b - 0.3 <= i * window_s <= e + 0.3 for b, e in spoken)]  # fmt: skip
    assert silent and max(silent) < 0.5
