"""A piper (VITS) voice run on onnxruntime directly, phonemes supplied by the caller.

The computation piper does, and sherpa-onnx's piper path did for us: each clause's phonemes
become ids ``^ _ p1 _ p2 _ ... $`` (piper's blank ``_`` after every symbol) from the folder's
``tokens.txt``, the model runs once per clause, and the clauses' audio is joined. With noise
scales 0 the samples are those sherpa-onnx 2.0.1 gives, up to the trailing near-silence it
cuts. One onnxruntime session per process: on the same voice file it is faster than the
runtime bundled in sherpa-onnx (see MODELS.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.errors import ConfigError

Samples = NDArray[np.float32]

_PAD, _BOS, _EOS = "_", "^", "$"


def read_symbol_ids(tokens: Path) -> dict[str, int]:
    """``<symbol> <id>`` per line, as sherpa-onnx reads it (the symbol may be a space)."""
    ids: dict[str, int] = {}
    for line in tokens.read_text(encoding="utf-8").splitlines():
        symbol, _, number = line.rpartition(" ")
        if len(symbol) != 1 or not number.isdigit():
            raise ConfigError(f"{tokens}: {line!r} is not '<one symbol> <id>'")
        ids[symbol] = int(number)
    return ids


def read_token_ids(tokens: Path) -> dict[str, int]:
    """A piper voice's symbol ids: `read_symbol_ids` with piper's ``_ ^ $`` checked."""
    ids = read_symbol_ids(tokens)
    missing = [s for s in (_PAD, _BOS, _EOS) if s not in ids]
    if missing:
        raise ConfigError(f"{tokens} lacks piper's {' '.join(missing)} symbols")
    return ids


def token_ids(ids: dict[str, int], phonemes: str) -> list[int]:
    """piper's id sequence for one clause; a symbol the voice has no id for is skipped, as
    sherpa-onnx and piper do."""
    pad = ids[_PAD]
    out = [ids[_BOS], pad]
    for symbol in phonemes:
        found = ids.get(symbol)
        if found is not None:
            out += (found, pad)
    out.append(ids[_EOS])
    return out


class OrtVits:
    """`Synthesizer` for a piper VITS voice on one onnxruntime session."""

    def __init__(
        self,
        model: Path,
        tokens: Path,
        sample_rate: int,
        threads: int = 1,
        noise_scale: float = 0.667,
        noise_scale_w: float = 0.8,
        length_scale: float = 1.0,
        n_speakers: int = 1,
    ) -> None:
        self._session = cpu_session(model, threads)
        names = {i.name for i in self._session.get_inputs()}
        if not {"input", "input_lengths", "scales"} <= names:
            raise ConfigError(f"{model} is not a piper VITS model (inputs {sorted(names)})")
        self._has_sid = "sid" in names
        if n_speakers > 1 and not self._has_sid:
            raise ConfigError(f"{model} declares {n_speakers} speakers but takes no sid")
        self._ids = read_token_ids(tokens)
        self._scales = (noise_scale, length_scale, noise_scale_w)
        self.sample_rate = sample_rate

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> Samples:
        """Audio for one sentence given as phoneme strings (one per espeak clause)."""
        noise, length, noise_w = self._scales
        scales = np.array([noise, length / speed, noise_w], dtype=np.float32)
        parts: list[Samples] = []
        for clause in phonemes:
            if not clause:
                continue
            ids = np.array([token_ids(self._ids, clause)], dtype=np.int64)
            feeds = {
                "input": ids,
                "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
                "scales": scales,
            }
            if self._has_sid:
                feeds["sid"] = np.array([speaker_id], dtype=np.int64)
            audio = self._session.run(None, feeds)[0]
            parts.append(np.asarray(audio, dtype=np.float32).reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
