"""sherpa-onnx adapter: the silero voice activity detector.

The only module that imports `sherpa_onnx`. Load it once per worker process after fork.
Callers validate the model first (`pipelines.speech.vad.validate_vad_model`): sherpa ends the
process, without a Python exception, on a model it cannot read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sherpa_onnx
from numpy.typing import NDArray

Samples = NDArray[np.float32]


class SherpaSileroVad:
    """`SpeechDetector` over sherpa's `VoiceActivityDetector` with a silero model."""

    def __init__(
        self,
        model: Path,
        sample_rate: int = 16_000,
        threshold: float = 0.5,
        min_silence_s: float = 0.5,
        min_speech_s: float = 0.25,
        max_speech_s: float = 20.0,
        threads: int = 1,
    ) -> None:
        self.sample_rate = sample_rate
        self._window = 512 if sample_rate == 16_000 else 256  # silero's window sizes
        config = sherpa_onnx.VadModelConfig(
            silero_vad=sherpa_onnx.SileroVadModelConfig(
                model=str(model),
                threshold=threshold,
                min_silence_duration=min_silence_s,
                min_speech_duration=min_speech_s,
                max_speech_duration=max_speech_s,
                window_size=self._window,
            ),
            sample_rate=sample_rate,
            num_threads=threads,
        )
        # The buffer holds audio not yet handed out: room for the longest segment and more.
        self._vad = sherpa_onnx.VoiceActivityDetector(
            config, buffer_size_in_seconds=max(60.0, 3 * max_speech_s)
        )

    def accept(self, samples: Samples) -> None:
        # Fed more than a window at a time, sherpa's detector misses regions and skips its
        # max_speech_duration cut (measured with 2.0.1): hand it one window per call.
        step = self._window
        for start in range(0, len(samples), step):
            self._vad.accept_waveform(samples[start : start + step])

    def flush(self) -> None:
        self._vad.flush()

    def reset(self) -> None:
        self._vad.reset()

    def pop(self) -> list[tuple[int, Samples]]:
        """Finished speech segments as (start sample, samples)."""
        out: list[tuple[int, Samples]] = []
        while not self._vad.empty():
            segment = self._vad.front
            out.append((int(segment.start), np.asarray(segment.samples, dtype=np.float32)))
            self._vad.pop()
        return out
