"""The whisper engine's own parts that need no model: features, vocabulary, metadata."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from pipelines.engines.whisper_features import WhisperMeta, encoder_input, log_mel, read_vocabulary
from pipelines.errors import ConfigError
from pipelines.onnx_metadata import write_with_metadata

pytestmark = pytest.mark.unit

FILTERS = np.full((80, 201), 1e-3, dtype=np.float32)


def test_features_are_one_frame_per_10_ms_normalised_like_whisper() -> None:
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(16_000 * 2) * 0.1).astype(np.float32)
    mel = log_mel(audio, FILTERS)
    assert mel.shape == (80, 200) and mel.dtype == np.float32
    # whisper's normalisation: log10 clamped to 8 below the peak, then (x + 4) / 4
    assert float(mel.max() - mel.min()) <= 2.0 + 1e-6


def test_the_encoder_gets_the_audio_then_zero_frames_within_30_s() -> None:
    audio = np.full(16_000 * 2, 0.05, dtype=np.float32)
    mel, frames = encoder_input(audio, FILTERS, tail_frames=300)
    assert frames == 200 and mel.shape == (1, 80, 500)
    assert not mel[0, :, 200:].any()  # padding is 0 in the normalised domain
    short, frames = encoder_input(np.zeros(10, np.float32), FILTERS, tail_frames=300)
    assert frames == 2 and short.shape == (1, 80, 302)
    # 31 s of audio: cut to leave 50 frames of padding, never over 3000 frames in all
    long, frames = encoder_input(np.zeros(16_000 * 31, np.float32), FILTERS, tail_frames=300)
    assert frames == 2950 and long.shape == (1, 80, 3000)


def test_the_vocabulary_is_base64_bytes_by_rank(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    words = [b"Hello", b" wor", "ld\u00e9".encode()]
    tokens.write_text(
        "".join(f"{base64.b64encode(w).decode()} {i}\n" for i, w in enumerate(words)),
        encoding="ascii",
    )
    assert read_vocabulary(tokens) == words


@pytest.mark.parametrize("line", ["SGVsbG8= 1", "SGVsbG8=", "not*base64 0"])
def test_a_malformed_vocabulary_line_is_refused(tmp_path: Path, line: str) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(line + "\n", encoding="ascii")
    with pytest.raises(ConfigError, match=r"tokens.txt:1 is not"):
        read_vocabulary(tokens)


def test_metadata_that_cannot_be_read_as_numbers_is_a_config_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare.onnx"
    bare.write_bytes(b"")
    encoder = tmp_path / "encoder.onnx"
    write_with_metadata(bare, encoder, {"n_mels": "eighty"})
    with pytest.raises(ConfigError, match="whisper metadata unusable"):
        WhisperMeta.read(encoder)
