"""Cutting long audio into speech chunks short enough for whisper (at most 30 s a pass).

A `SpeechDetector` (silero on onnxruntime in production, `pipelines.engines.silero`) finds
speech regions while audio streams in; regions still longer than `max_chunk_s` are cut at
their quietest point.
Without a detector, audio is cut into windows at quiet points (`window_chunks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pipelines.errors import ConfigError

Samples = NDArray[np.float32]

_FRAME_S = 0.02  # energy is measured over 20 ms frames when looking for a cut point
# ...and a cut goes in the quietest stretch this long: a pause between words, not the silent
# closure before a `p` or `t` (30-80 ms), which would split the word across two windows.
_PAUSE_FRAMES = 8


class SpeechDetector(Protocol):
    """Streaming voice activity detection: feed samples, collect finished regions."""

    @property
    def sample_rate(self) -> int: ...

    def accept(self, samples: Samples) -> None: ...

    def flush(self) -> None: ...

    def reset(self) -> None: ...

    def pop(self) -> list[tuple[int, Samples]]:
        """Finished speech regions as (start sample since the last reset, samples)."""
        ...


@dataclass(frozen=True, slots=True)
class VadConfig:
    model: Path
    threshold: float = 0.5
    min_silence_s: float = 0.5
    min_speech_s: float = 0.25
    # A region this long is handed on and the next one continues from the same sample.
    max_speech_s: float = 20.0
    pad_s: float = 0.2  # audio kept before and after each region
    threads: int = 1


@dataclass(frozen=True, slots=True)
class SpeechChunk:
    start_s: float
    samples: Samples
    sample_rate: int

    @property
    def end_s(self) -> float:
        return self.start_s + len(self.samples) / self.sample_rate


# In a folder, silero's sequence export (every window of a block in one call) is preferred.
VAD_FILES = ("silero_vad_16k_sequence.onnx", "silero_vad.onnx")


def validate_vad_model(path: Path) -> Path:
    """The silero ONNX file itself, or a folder holding one of `VAD_FILES`."""
    from pipelines.onnx_metadata import read_onnx_metadata

    found = [path / name for name in VAD_FILES if (path / name).is_file()]
    model = (found[0] if found else path / VAD_FILES[-1]) if path.is_dir() else path
    if not model.is_file():
        raise ConfigError(f"VAD model not found: {model}")
    read_onnx_metadata(model)  # raises ConfigError when the file is not ONNX at all
    return model


def speech_chunks(
    audio: Iterable[Samples], detector: SpeechDetector, max_chunk_s: float = 28.0
) -> Iterator[SpeechChunk]:
    """Speech regions of a stream, in order, none longer than `max_chunk_s`."""
    rate = detector.sample_rate
    detector.reset()
    for block in audio:
        detector.accept(block)
        yield from _emit(detector.pop(), rate, max_chunk_s)
    detector.flush()
    yield from _emit(detector.pop(), rate, max_chunk_s)


def _emit(
    regions: list[tuple[int, Samples]], rate: int, max_chunk_s: float
) -> Iterator[SpeechChunk]:
    for start, samples in regions:
        for offset, piece in split_long(samples, rate, max_chunk_s):
            yield SpeechChunk((start + offset) / rate, piece, rate)


def split_long(
    samples: Samples, sample_rate: int, max_s: float = 28.0
) -> list[tuple[int, Samples]]:
    """Cut `samples` into pieces of at most `max_s`, each cut in the middle of the quietest
    160 ms past the first third of its window. Returns (offset in samples, piece) pairs."""
    limit = int(max_s * sample_rate)
    pieces: list[tuple[int, Samples]] = []
    offset = 0
    while len(samples) - offset > limit:
        cut = offset + _quietest_cut(samples[offset : offset + limit], sample_rate)
        pieces.append((offset, samples[offset:cut]))
        offset = cut
    if len(samples) > offset:
        pieces.append((offset, samples[offset:]))
    return pieces


def _quietest_cut(window: Samples, sample_rate: int) -> int:
    """Middle of the quietest `_PAUSE_FRAMES` 20 ms frames past the first third (the latest
    stretch on ties)."""
    frame = max(1, int(_FRAME_S * sample_rate))
    first = (len(window) // 3) // frame
    count = len(window) // frame
    if count <= first:
        return len(window)
    frames = window[: count * frame].reshape(count, frame)[first:].astype(np.float64)
    energy = np.einsum("ij,ij->i", frames, frames)
    span = min(_PAUSE_FRAMES, len(energy))
    stretch = np.convolve(energy, np.ones(span), mode="valid")  # energy of each stretch
    latest = len(stretch) - 1 - int(np.argmin(stretch[::-1]))
    return (first + latest) * frame + (span * frame) // 2


def window_chunks(
    audio: Iterable[Samples], sample_rate: int, max_chunk_s: float = 28.0
) -> Iterator[SpeechChunk]:
    """Without a detector: consecutive windows of at most `max_chunk_s`, cut at quiet points.
    Memory stays bounded by two windows whatever the stream's length."""
    limit = int(max_chunk_s * sample_rate)
    pending: list[Samples] = []
    held = 0
    start = 0
    for block in audio:
        pending.append(block)
        held += len(block)
        while held > limit:
            buf = np.concatenate(pending)
            cut = _quietest_cut(buf[:limit], sample_rate)
            yield SpeechChunk(start / sample_rate, buf[:cut], sample_rate)
            start += cut
            pending, held = [buf[cut:]], len(buf) - cut
    if held:
        yield SpeechChunk(start / sample_rate, np.concatenate(pending), sample_rate)
