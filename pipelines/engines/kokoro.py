"""A Kokoro v1.0 model run on onnxruntime directly, phonemes supplied by the caller.

Kokoro's own recipe, as kokoro-onnx and sherpa-onnx run it: a clause's phonemes become ids
from the folder's ``tokens.txt`` (a symbol without one is skipped), framed by 0 at both ends;
the voice is the speaker's style vector for that many ids, row n - 1 for n ids (``voices.bin``
holds ``n_speakers x max_ids x style`` float32, ``style_dim`` in the model's metadata; hexgrad's
Kokoro reads ``pack[len(ps) - 1]``, kokoro-onnx ``voice[len(tokens) - 1]``); the model
runs once per clause and the clauses' audio is joined. One session per process: on these
machines it ran a sentence in 5.2 s where sherpa-onnx 2.0.1 took 8.2 s (see MODELS.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.engines.vits import read_symbol_ids
from pipelines.errors import ConfigError

Samples = NDArray[np.float32]
_Speaker = int | tuple[tuple[int, float], ...]  # one voice, or a blend (id, coefficient)


class OrtKokoro:
    """`Synthesizer` for a Kokoro folder: one model, every voice in ``voices.bin``."""

    def __init__(
        self,
        model: Path,
        voices: Path,
        tokens: Path,
        sample_rate: int,
        n_speakers: int,
        style_dim: tuple[int, int, int],
        threads: int = 1,
    ) -> None:
        self._session = cpu_session(model, threads)
        names = [i.name for i in self._session.get_inputs()]
        if len(names) != 3:
            raise ConfigError(f"{model} is not a Kokoro model (inputs {names})")
        self._inputs = names  # ids, style, speed, in the model's order
        max_ids, one, width = style_dim
        if one != 1:
            raise ConfigError(f"{model}: style_dim {style_dim} is not (ids, 1, style)")
        styles = np.fromfile(voices, dtype=np.float32)
        if styles.size != n_speakers * max_ids * width:
            raise ConfigError(f"{voices} does not hold {n_speakers} voices of {style_dim}")
        self._styles = styles.reshape(n_speakers, max_ids, width)
        self._ids = read_symbol_ids(tokens)
        self.sample_rate = sample_rate

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> Samples:
        """Audio for one sentence given as phoneme strings (one per clause)."""
        return self._speak(phonemes, speaker_id, speed)

    def synthesize_mix(
        self, phonemes: Sequence[str], mix: Sequence[tuple[int, float]], speed: float = 1.0
    ) -> Samples:
        """Audio for one sentence in a blend of voices: each run's style is the blend's
        weighted sum of the voices' styles for that many ids."""
        return self._speak(phonemes, tuple(mix), speed)

    def _speak(self, phonemes: Sequence[str], speaker: _Speaker, speed: float) -> Samples:
        step = self._styles.shape[1]  # the longest run the style table covers
        parts: list[Samples] = []
        for clause in phonemes:
            known = [self._ids[s] for s in clause if s in self._ids]
            # A clause longer than the model's context is spoken in consecutive runs.
            for start in range(0, len(known), step):
                parts.append(self._run(known[start : start + step], speaker, speed))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    def _style(self, speaker: _Speaker, length: int) -> Samples:
        """The style for `length` ids (no pads): row length - 1."""
        row = length - 1
        if isinstance(speaker, int):
            return np.asarray(self._styles[speaker, row][None, :], dtype=np.float32)
        style = sum(weight * self._styles[sid, row] for sid, weight in speaker)
        return np.asarray(style, dtype=np.float32)[None, :]

    def _run(self, ids: list[int], speaker_id: _Speaker, speed: float) -> Samples:
        feeds = {
            self._inputs[0]: np.array([[0, *ids, 0]], dtype=np.int64),
            self._inputs[1]: self._style(speaker_id, len(ids)),
            self._inputs[2]: np.array([speed], dtype=np.float32),
        }
        audio = self._session.run(None, feeds)[0]
        return np.asarray(audio, dtype=np.float32).reshape(-1)
