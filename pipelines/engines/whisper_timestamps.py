"""whisper's timestamp decoding, as the reference implementation does it: the rules that
constrain each greedy step, and how a window's tokens become timed pieces and a seek.

Timestamp tokens follow ``<|notimestamps|>`` in the vocabulary, one per 20 ms of the 30 s
window. Decoding writes ``<|t0|> text <|t1|><|t1'|> text <|t2|> ...``: a pair of timestamps
ends one piece and starts the next. When the last piece is cut off (the pair is not closed by
a single timestamp before the end), whisper drops it and the next window starts at the last
complete timestamp ("seek"), so no sentence is split by the window's edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

SECONDS_PER_TIMESTAMP = 0.02
MAX_INITIAL_TIMESTAMP = 50  # the first piece starts within 1 s of the window (whisper's 1.0)


@dataclass(frozen=True, slots=True)
class TimedTokens:
    start: int  # timestamp positions (x 20 ms) within the window
    end: int | None  # None: the piece runs to the window's end (no closing timestamp)
    tokens: tuple[int, ...]  # text tokens only
    # As decoded, its timestamps and its text (what verbose_json reports; not compared).
    written: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class WindowTokens:
    pieces: tuple[TimedTokens, ...]
    # Timestamp position where the next window starts; None: the whole window was used.
    seek: int | None


def apply_timestamp_rules(
    logits: NDArray[np.float32], sampled: list[int], ts_begin: int, eot: int
) -> None:
    """Constrain the next token's `logits` in place (whisper's ApplyTimestampRules).

    `sampled`: the tokens chosen so far after the prompt. ``ts_begin - 1`` is
    ``<|notimestamps|>``; text tokens are those below `eot`, the end of text.
    """
    logits[ts_begin - 1] = -np.inf
    last_ts = len(sampled) >= 1 and sampled[-1] >= ts_begin
    penultimate_ts = len(sampled) < 2 or sampled[-2] >= ts_begin
    if last_ts:
        if penultimate_ts:  # a pair was just closed: text or the end comes next
            logits[ts_begin:] = -np.inf
        else:  # a piece's text just ended with its timestamp: another one, or the end
            logits[:eot] = -np.inf
    stamps = [t for t in sampled if t >= ts_begin]
    if stamps:  # time never runs backwards (a closing timestamp may repeat the opening one)
        floor = stamps[-1] if last_ts and not penultimate_ts else stamps[-1] + 1
        logits[ts_begin:floor] = -np.inf
    if not sampled:  # the window opens on a timestamp, within the first second
        logits[:ts_begin] = -np.inf
        logits[ts_begin + MAX_INITIAL_TIMESTAMP + 1 :] = -np.inf
    # When timestamps together are likelier than any single text token, take a timestamp.
    top = float(np.max(logits))
    shifted = logits - top
    log_total = np.log(np.sum(np.exp(shifted)))
    timestamp_mass = np.logaddexp.reduce(shifted[ts_begin:]) - log_total
    if timestamp_mass > float(np.max(shifted[:ts_begin])) - log_total:
        logits[:ts_begin] = -np.inf


def split_window(tokens: list[int], ts_begin: int, eot: int) -> WindowTokens:
    """Pieces of one window's tokens (the end-of-text token excluded) and where to seek."""
    is_ts = [t >= ts_begin for t in tokens]
    cuts = [i for i in range(1, len(tokens)) if is_ts[i - 1] and is_ts[i]]
    single_ending = len(tokens) >= 2 and is_ts[-1] and not is_ts[-2]

    def piece(part: list[int]) -> TimedTokens:
        stamps = [t - ts_begin for t in part if t >= ts_begin]
        start = stamps[0] if stamps else 0
        end = stamps[-1] if len(stamps) > 1 else None
        return TimedTokens(start, end, tuple(t for t in part if t < eot), tuple(part))

    if not cuts:  # one piece; the window is used whole
        return WindowTokens((piece(tokens),) if tokens else (), None)
    if single_ending:
        cuts.append(len(tokens))
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(piece(tokens[last:cut]))
        last = cut
    if single_ending:
        return WindowTokens(tuple(pieces), None)
    seek = tokens[last - 1] - ts_begin
    return WindowTokens(tuple(pieces), seek if seek > 0 else None)
