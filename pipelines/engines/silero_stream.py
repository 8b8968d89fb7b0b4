"""silero scoring a live stream: each 512-sample window at 16 kHz scored as it completes, the
model's state carried between calls, audio at another rate resampled on the way in (linear
interpolation, continued across calls). The model loads once (`SileroScoring`); each stream
(`SileroStream`) holds only its state, and onnxruntime runs concurrent calls on one session.

`SileroVad` beside it finds regions in whole recordings, scoring 8 s of audio a call; a stream
cannot wait for 8 s, so this scores whatever windows each piece of audio completes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.engines.silero import CONTEXT, RATE, WINDOW
from pipelines.errors import ConfigError


class SileroScoring:
    """`SpeechScoring` over a silero model file (the sequence or the streaming export)."""

    def __init__(self, model: Path, threads: int = 1) -> None:
        self._session = cpu_session(model, threads)
        inputs = {i.name for i in self._session.get_inputs()}
        if inputs not in ({"input", "h", "c"}, {"input", "state", "sr"}):
            raise ConfigError(f"{model} is not a silero VAD model (inputs {sorted(inputs)})")
        self._sequence = inputs == {"input", "h", "c"}

    def open(self, rate: int) -> SileroStream:
        return SileroStream(self._session, self._sequence, rate)


class SileroStream:
    """One stream's scorer (`SpeechScores`)."""

    window_s = WINDOW / RATE

    def __init__(self, session: onnxruntime.InferenceSession, sequence: bool, rate: int) -> None:
        self._session = session
        self._sequence = sequence
        self._rate = rate
        self._odd = b""  # half a sample left by the last feed
        self._native = np.zeros(0, np.float32)  # input audio not yet resampled past
        self._native_at = 0  # absolute input sample of `_native[0]`
        self._next = 0  # absolute 16 kHz sample to produce next
        self._audio = np.zeros(CONTEXT, np.float32)  # the context, then samples not yet scored
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._state = np.zeros((2, 1, 128), np.float32)

    def feed(self, pcm16: bytes) -> list[float]:
        data = self._odd + pcm16
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        samples = np.frombuffer(data[:cut], "<i2").astype(np.float32) / 32768.0
        self._audio = np.concatenate([self._audio, self._resampled(samples)])
        count = (len(self._audio) - CONTEXT) // WINDOW
        if count == 0:
            return []
        index = np.arange(count)[:, None] * WINDOW + np.arange(CONTEXT + WINDOW)[None, :]
        frames = self._audio[index]
        self._audio = self._audio[count * WINDOW :]
        return self._probabilities(frames)

    def _resampled(self, samples: NDArray[np.float32]) -> NDArray[np.float32]:
        if self._rate == RATE:
            return samples
        self._native = np.concatenate([self._native, samples])
        last = self._native_at + len(self._native) - 1  # the last input sample held
        step = self._rate / RATE
        count = int(last / step) - self._next + 1 if last >= 0 else 0
        if count <= 0:
            return np.zeros(0, np.float32)
        where = (self._next + np.arange(count)) * step - self._native_at
        out: NDArray[np.float32] = np.interp(
            where, np.arange(len(self._native)), self._native
        ).astype(np.float32)
        self._next += count
        keep = int(self._next * step) - self._native_at  # the sample before the next output
        if keep > 0:
            self._native = self._native[keep:]
            self._native_at += keep
        return out

    def _probabilities(self, frames: NDArray[np.float32]) -> list[float]:
        if self._sequence:
            probs, self._h, self._c = self._session.run(
                None, {"input": frames, "h": self._h, "c": self._c}
            )
            return [float(p) for p in np.asarray(probs, np.float32).reshape(-1)]
        out = []
        rate = np.array(RATE, np.int64)
        for frame in frames:
            prob, self._state = self._session.run(
                None, {"input": frame[None], "state": self._state, "sr": rate}
            )
            out.append(float(np.asarray(prob).reshape(-1)[0]))
        return out
