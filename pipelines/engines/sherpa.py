"""sherpa-onnx adapters: the silero VAD and the Kokoro synthesizer.

The only module that imports `sherpa_onnx`. Constructors load models (seconds, hundreds of
MB); call them once per worker process after fork. Callers validate model folders first
(`pipelines.speech.stt/tts.validate_model_dir`): sherpa ends the process, without a Python
exception, when required ONNX metadata is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def _generate(
    tts: sherpa_onnx.OfflineTts, phonemes: Sequence[str], speaker_id: int, speed: float
) -> Samples:
    gen = sherpa_onnx.GenerationConfig()
    gen.sid = speaker_id
    gen.speed = speed
    codepoints = [[ord(ch) for ch in part] for part in phonemes if part]
    if not codepoints:
        return np.zeros(0, dtype=np.float32)
    gen.phoneme_codepoints = codepoints
    audio = tts.generate("", gen)
    return np.asarray(audio.samples, dtype=np.float32)


class SherpaKokoro:
    """`Synthesizer` over `OfflineTts` for a Kokoro v1.0 folder, phonemes supplied by caller.

    One model speaks every voice in ``voices.bin``; the speaker id picks the voice.
    """

    def __init__(self, model: Path, voices: Path, tokens: Path, threads: int = 1) -> None:
        kokoro = sherpa_onnx.OfflineTtsKokoroModelConfig(
            model=str(model), voices=str(voices), tokens=str(tokens)
        )
        config = sherpa_onnx.OfflineTtsConfig(
            model=sherpa_onnx.OfflineTtsModelConfig(kokoro=kokoro, num_threads=threads),
            max_num_sentences=1,
        )
        self._tts = sherpa_onnx.OfflineTts(config)
        self.sample_rate = int(self._tts.sample_rate)

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> Samples:
        return _generate(self._tts, phonemes, speaker_id, speed)
