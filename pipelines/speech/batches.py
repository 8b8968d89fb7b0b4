"""Speech windows decoded side by side, for long audio.

The exported whisper models take one window a pass (their batch axis is fixed at 1), so a
batch here is windows run at the same time on one model from a thread each: onnxruntime
releases the interpreter while it computes, and a decoder step on one window is too small to
keep every core busy, so two windows at once fill the cores a single one leaves idle.
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
        pieces: list[Segment] = []
        heard, at = "", 0
        # whisper sometimes ends its text before the window does: the rest is read again from
        # where it stopped (as window after window would), unless too short to be a phrase.
        while len(samples) - at >= _REREAD_S * rate:
            rest = samples[at:]
            if float(np.max(np.abs(rest))) < _DIGITAL_SILENCE:
                break
            said, used_s, heard = decode(rest)
            pieces.extend(_shifted(piece, at / rate) for piece in said)
            at += max(1, round(used_s * rate))
        return tuple(pieces), len(samples) / rate, heard

    return list(pool.map(one, windows))


def _shifted(piece: Segment, by_s: float) -> Segment:
    if not by_s:
        return piece
    words = tuple(Word(w.word, w.start + by_s, w.end + by_s) for w in piece.words)
    return replace(piece, start=piece.start + by_s, end=piece.end + by_s, words=words)
