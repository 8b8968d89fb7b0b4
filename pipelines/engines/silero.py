"""silero voice activity detection on onnxruntime: speech probabilities per 32 ms window,
and the regions where someone speaks.

Two model layouts are read. silero's sequence export (``silero_vad_16k_sequence.onnx``:
``input [windows, 576]``, ``h``, ``c``) scores every window of a block in one call, with the
same probabilities as the streaming one (checked to the last bit on our bench clip) at a
quarter of the time here; the streaming export (``silero_vad.onnx``: ``input [1, 576]``,
``state``, ``sr``) is called once per window. Each window is 512 new samples after the 64
before them.

Regions follow silero's own rule: speech starts on a window at or above `threshold`, and ends
once the probability has stayed below ``threshold - 0.15`` for `min_silence_s`; regions
shorter than `min_speech_s` are dropped, and each keeps `pad_s` of audio on both sides (never
overlapping its neighbour). A region reaching `max_speech_s` is handed on and the next one
continues from the same sample, so memory stays bounded on speech without pauses. As in
silero's own rule, that cut falls in the longest short pause (at least ~0.1 s below the
lower threshold) past the first third of the region, and only where there is none at the limit
itself: a cut in the middle of a word makes both windows read it wrong (the closure before a
`p` is quiet too, but shorter than any pause).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.errors import ConfigError

Samples = NDArray[np.float32]

RATE = 16_000
WINDOW = 512
CONTEXT = 64
_BATCH = 256  # windows per call of the sequence model (8 s of audio)
_HYSTERESIS = 0.15
_PAUSE_AT_MAX_SPEECH = 3 * WINDOW  # 96 ms: silero's min_silence_at_max_speech (98 ms)


class SileroVad:
    """`SpeechDetector` over a silero model (16 kHz only)."""

    sample_rate = RATE

    def __init__(
        self,
        model: Path,
        threshold: float = 0.5,
        min_silence_s: float = 0.5,
        min_speech_s: float = 0.25,
        max_speech_s: float = 20.0,
        pad_s: float = 0.2,
        threads: int = 1,
    ) -> None:
        self._session = cpu_session(model, threads)
        inputs = {i.name for i in self._session.get_inputs()}
        if inputs == {"input", "h", "c"}:
            self._sequence = True
        elif inputs == {"input", "state", "sr"}:
            self._sequence = False
        else:
            raise ConfigError(f"{model} is not a silero VAD model (inputs {sorted(inputs)})")
        self._threshold = threshold
        self._min_silence = int(min_silence_s * RATE)
        self._min_speech = int(min_speech_s * RATE)
        self._max_speech = max(int(max_speech_s * RATE), WINDOW)
        self._pad = int(pad_s * RATE)
        self.reset()

    def reset(self) -> None:
        self._audio = np.zeros(0, np.float32)  # held audio, from absolute sample `_held`
        self._held = 0
        self._scored = 0  # absolute sample where the next window starts
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._state = np.zeros((2, 1, 128), np.float32)
        self._start: int | None = None  # where the current region's speech began
        self._silent_since: int | None = None
        self._pauses: list[tuple[int, int]] = []  # the region's short pauses so far
        self._after_cut = False  # the current region began at a cut of a longer one
        self._last_end = 0  # end of the last region handed on (padding never overlaps it)
        self._done: list[tuple[int, Samples]] = []
        self._pending: list[Samples] = []
        self._pending_samples = 0

    def accept(self, samples: Samples) -> None:
        # Scored a batch at a time: one call of the sequence model per 8 s of audio.
        self._pending.append(samples.astype(np.float32, copy=False))
        self._pending_samples += len(samples)
        if self._pending_samples >= _BATCH * WINDOW:
            self._score(final=False)

    def flush(self) -> None:
        self._score(final=True)
        end = self._held + len(self._audio)
        if self._start is not None:
            silent = self._silent_since
            self._close(self._start, end if silent is None else silent, pad_end=True)
            self._start = None

    def pop(self) -> list[tuple[int, Samples]]:
        done, self._done = self._done, []
        return done

    def _score(self, *, final: bool) -> None:
        """Score every complete window held (and, at the end, the last partial one)."""
        self._audio = np.concatenate([self._audio, *self._pending])
        self._pending, self._pending_samples = [], 0
        end = self._held + len(self._audio)
        count = (end - self._scored) // WINDOW
        if final and (end - self._scored) % WINDOW:
            count += 1
        while count > 0:
            batch = min(count, _BATCH)
            frames = self._frames(batch)
            for i, prob in enumerate(self._probabilities(frames)):
                self._step(float(prob), self._scored + i * WINDOW)
            self._scored += batch * WINDOW
            count -= batch
        self._trim()

    def _frames(self, count: int) -> NDArray[np.float32]:
        """[count, 576]: each window's 64 samples before it, then its 512 (zeros past the end)."""
        first = self._scored - CONTEXT - self._held
        span = np.zeros(CONTEXT + count * WINDOW, np.float32)
        lo = max(first, 0)
        piece = self._audio[lo : first + len(span)]
        span[lo - first : lo - first + len(piece)] = piece
        index = np.arange(count)[:, None] * WINDOW + np.arange(CONTEXT + WINDOW)[None, :]
        frames: NDArray[np.float32] = span[index]
        return frames

    def _probabilities(self, frames: NDArray[np.float32]) -> NDArray[np.float32]:
        if self._sequence:
            probs, self._h, self._c = self._session.run(
                None, {"input": frames, "h": self._h, "c": self._c}
            )
            return np.asarray(probs, np.float32).reshape(-1)
        out = np.empty(len(frames), np.float32)
        rate = np.array(RATE, np.int64)
        for i, frame in enumerate(frames):
            prob, self._state = self._session.run(
                None, {"input": frame[None], "state": self._state, "sr": rate}
            )
            out[i] = float(np.asarray(prob).reshape(-1)[0])
        return out

    def _step(self, prob: float, at: int) -> None:
        """One window's probability; `at` is where the window starts."""
        if self._start is None:
            if prob >= self._threshold:
                self._start, self._silent_since, self._pauses = at, None, []
                self._after_cut = False
            return
        if prob >= self._threshold:
            self._silent_since = None
        elif prob < self._threshold - _HYSTERESIS and self._silent_since is None:
            self._silent_since = at
        after = at + WINDOW
        silent = self._silent_since
        if silent is not None and after - silent >= _PAUSE_AT_MAX_SPEECH:
            if self._pauses and self._pauses[-1][0] == silent:
                self._pauses[-1] = (silent, after)  # the same pause, longer
            else:
                self._pauses.append((silent, after))
        if silent is not None and after - silent >= self._min_silence:
            self._close(self._start, silent, pad_end=True)
            self._start = self._silent_since = None
        elif after - self._start >= self._max_speech:
            cut = self._cut(self._start, after)
            self._close(self._start, cut, pad_end=False)
            self._start, self._pauses, self._after_cut = cut, [], True
            if silent is not None:  # still in the pause: its rest belongs to the next region
                self._silent_since = max(silent, cut)

    def _cut(self, start: int, limit: int) -> int:
        """Where a region spoken from `start` that reached `limit` is cut: the middle of its
        longest short pause (the latest of equals) past the first third and at least
        `min_speech_s` in, else at the limit. The longest, as silero does by default since
        5.1: the last one is as often a dip inside a word as a breath between two."""
        floor = start + max((limit - start) // 3, self._min_speech)
        middles = [
            (end - begin, begin, (begin + end) // 2)
            for begin, end in self._pauses
            if (begin + end) // 2 >= floor
        ]
        return max(middles)[2] if middles else limit

    def _close(self, speech_start: int, speech_end: int, *, pad_end: bool) -> None:
        """Hand on the region spoken over [`speech_start`, `speech_end`) (absolute samples
        since the last reset), with its padding. Too short a region is dropped, unless it
        ends at a cut (`pad_end` False) or is the spoken rest of a region cut before."""
        spoken = speech_end - speech_start
        if spoken < self._min_speech and pad_end and not (self._after_cut and spoken > 0):
            return
        available = self._held + len(self._audio)
        start = max(speech_start - self._pad, self._last_end, self._held)
        end = min(speech_end + (self._pad if pad_end else 0), available)
        if end <= start:
            return
        self._done.append((start, self._audio[start - self._held : end - self._held].copy()))
        self._last_end = end

    def _trim(self) -> None:
        """Drop audio no region can need any more (the context and padding are kept)."""
        keep = self._scored - max(CONTEXT, self._pad)
        if self._start is not None:
            keep = min(keep, self._start - self._pad)
        keep = min(max(keep, self._held), self._held + len(self._audio))
        if keep > self._held:
            self._audio = self._audio[keep - self._held :]
            self._held = keep
