"""Kokoro's voice style for a clause: n phoneme ids (the pads aside) take row n - 1 of the
voice's table, as hexgrad's Kokoro (``pack[len(ps) - 1]``) and kokoro-onnx
(``voice[len(tokens) - 1]``) choose it; checked against the model run directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from pipelines.engines.kokoro import OrtKokoro
from pipelines.engines.registry import load_tts
from pipelines.engines.vits import read_symbol_ids
from pipelines.speech.config import TtsConfig
from pipelines.speech.tts import validate_kokoro_dir
from workers.provisioning.models import prepare

pytestmark = pytest.mark.models

PHONEMES = "ðə mˈiːtɪŋ mˈuːvd tə tˈuːzdeɪ."  # "The meeting moved to Tuesday."
SPEAKER = 2


def test_a_clause_is_spoken_in_the_style_row_of_its_length_minus_one(models_home: Path) -> None:
    prepare(models_home, tier="quality", log=lambda message: None)
    files = validate_kokoro_dir(models_home / "models" / "kokoro-v1.0")
    engine = load_tts(TtsConfig(models_home / "models" / "kokoro-v1.0", threads=1)).synthesizer
    assert isinstance(engine, OrtKokoro)
    symbols = read_symbol_ids(files.tokens)
    ids = [symbols[s] for s in PHONEMES if s in symbols]
    styles = np.fromfile(files.voices, dtype=np.float32).reshape(
        files.n_speakers, files.style_dim[0], files.style_dim[2]
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # as the engine runs: the same sums in the same order
    session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]  # ids, style, speed

    def direct(row: int) -> np.ndarray:
        feeds = {
            names[0]: np.array([[0, *ids, 0]], dtype=np.int64),
            names[1]: styles[SPEAKER, row][None, :],
            names[2]: np.array([1.0], dtype=np.float32),
        }
        return np.asarray(session.run(None, feeds)[0], dtype=np.float32).reshape(-1)

    spoken = engine.synthesize([PHONEMES], SPEAKER)
    expected = direct(len(ids) - 1)
    assert spoken.shape == expected.shape and np.allclose(spoken, expected, atol=1e-5)
    other = direct(len(ids))  # the row after it: another length, so the test can tell them apart
    assert other.shape != expected.shape or not np.allclose(other, expected, atol=1e-5)
