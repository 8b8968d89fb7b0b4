"""Speech windows decoded side by side, for long audio.

Two ways: an engine that decodes many windows in one call (our whisper: one encoder run and
one decoder run a step for all of them, `in_lockstep`), or windows run at the same time on
one model from a thread each (`side_by_side`): onnxruntime releases the interpreter while it
computes, and a decoder step on one window is too small to keep every core busy.
Windows decoded side by side cannot continue where the one before stopped reading: they are
cut in advance where nobody speaks (`SpeechTimeline.cuts`), as faster-whisper's batched
pipeline cuts them, and each is read to its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from pipelines.speech.transcript import Segment, Word

Samples = NDArray[np.float32]
Decoded = tuple[tuple[Segment, ...], float, str]  # pieces, seconds used, language

_DIGITAL_SILENCE = 1.25e-4  # as `stt`: a window of nothing louder is not decoded
_REREAD_S = 1.0


def side_by_side(
    pool: ThreadPoolExecutor,
    decode: Callable[[Samples], Decoded],
    windows: Sequence[Samples],
    rate: int,
) -> list[Decoded]:
    """Each window's decoding, in order; a window of digital silence decodes to nothing
    (whisper would only make words up)."""

    def one(samples: Samples) -> Decoded:
        (decoded,) = in_lockstep(lambda rests: [decode(rest) for rest in rests], [samples], rate)
        return decoded

    return list(pool.map(one, windows))


def in_lockstep(
    decode: Callable[[list[Samples]], list[Decoded]], windows: Sequence[Samples], rate: int
) -> list[Decoded]:
    """Each window's decoding, in order, `decode` taking every window still being read at
    once; a window of digital silence decodes to nothing."""
    pieces: list[list[Segment]] = [[] for _ in windows]
    heard = [""] * len(windows)
    at = [0] * len(windows)

    def unread(i: int) -> bool:
        # whisper sometimes ends its text before the window does: the rest is read again
        # from where it stopped (as window after window would), unless too short to be a
        # phrase or nothing but digital silence.
        rest = windows[i][at[i] :]
        return len(rest) >= _REREAD_S * rate and float(np.max(np.abs(rest))) >= _DIGITAL_SILENCE

    while reading := [i for i in range(len(windows)) if unread(i)]:
        decoded = decode([windows[i][at[i] :] for i in reading])
        for i, (said, used_s, language) in zip(reading, decoded, strict=True):
            pieces[i].extend(_shifted(piece, at[i] / rate) for piece in said)
            at[i] += max(1, round(used_s * rate))
            heard[i] = language
    return [
        (tuple(found), len(samples) / rate, language)
        for found, samples, language in zip(pieces, windows, heard, strict=True)
    ]


def _shifted(piece: Segment, by_s: float) -> Segment:
    if not by_s:
        return piece
    words = tuple(Word(w.word, w.start + by_s, w.end + by_s) for w in piece.words)
    return replace(piece, start=piece.start + by_s, end=piece.end + by_s, words=words)
