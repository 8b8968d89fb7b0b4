"""Word times from whisper's cross-attention, as openai-whisper and faster-whisper find them.

A few decoder heads ("alignment heads") attend to the audio frames being spoken as each token
is predicted. The decoder is run once more over the window's text (no timestamp tokens); the
scores of those heads, turned into attention over the audio frames only, standardised across
tokens and median-filtered in time, make a tokens x frames matrix. The cheapest monotone path
through its negation (dynamic time warping) gives each token the frame where it starts; a
word starts where its first token does and ends where the next word (or the end of text)
starts. One frame is 20 ms.

Then the sound is used: a word after punctuation starts where sound begins while the path is
still on that punctuation (`starts_after_marks`), and each word is narrowed to the sound
within it (`snap_to_sound`). Up to there this is openai-whisper's own alignment (its heads,
rows, filter and path), and on one-word sentences spoken with pauses whisper-tiny.en waits on
each full stop or comma into the next word: openai-whisper's tiny.en started three of five
such words 0.42-0.62 s late, ours (then snapping the start past the pause) one word late.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SECONDS_PER_FRAME = 0.02
MEDIAN_WIDTH = 7
# Sound begins (a word can start) after this many quiet frames: longer than the closure of
# a stop consonant inside a word (about 50-100 ms).
QUIET_FRAMES = 6
# Languages written without spaces: every character (UTF-8 sequence) is a word.
UNSPACED = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
_OPENING = "\"'“¿([{-«"  # punctuation that belongs to the word after it


@dataclass(frozen=True, slots=True)
class WordTokens:
    text: str  # as written, its leading space included
    tokens: tuple[int, ...]


def median_filter(x: NDArray[np.float32], width: int = MEDIAN_WIDTH) -> NDArray[np.float32]:
    """Median over a window of `width` (odd) along the last axis, edges reflected.

    The `width` shifted copies are sorted elementwise by odd-even transposition (`width`
    rounds of compare-and-swap with np.minimum/np.maximum): for the few heads x tokens x
    frames of a window, several times faster than np.median over a sliding view."""
    if width <= 1 or x.shape[-1] <= width // 2:
        return x
    pad = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    n = x.shape[-1]
    values = [padded[..., k : k + n] for k in range(width)]
    for round_ in range(width):
        for i in range(round_ % 2, width - 1, 2):
            low, high = values[i], values[i + 1]
            values[i], values[i + 1] = np.minimum(low, high), np.maximum(low, high)
    return values[pad]


def attention_matrix(scores: NDArray[np.float32], frames: int) -> NDArray[np.float32]:
    """Tokens x frames evidence that a token is spoken at a frame, from the alignment
    heads' raw scores [heads, tokens, T]: a softmax over the first `frames` (the audio,
    not the padding after it), each frame standardised across tokens, median-filtered in
    time, averaged over the heads."""
    audio = scores[:, :, :frames].astype(np.float32)
    audio = np.exp(audio - audio.max(axis=-1, keepdims=True))
    audio /= audio.sum(axis=-1, keepdims=True)
    mean = audio.mean(axis=-2, keepdims=True)
    std = audio.std(axis=-2, keepdims=True)
    standard = (audio - mean) / np.maximum(std, 1e-10)
    matrix: NDArray[np.float32] = median_filter(standard).mean(axis=0)
    return matrix


def dtw_path(cost: NDArray[np.floating]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(rows, columns) of the cheapest path from the first cell to the last of `cost`
    [N, M], moving one row, one column, or both at each step.

    Row by row: a cell is its cost plus the cheapest of the cell before it in its row and
    the two above it; along the row that is a running minimum over prefix sums, so each row
    is a few numpy passes (M is up to 1500 frames)."""
    n, m = cost.shape
    x = cost.astype(np.float64)
    total = np.empty((n, m))
    from_left = np.zeros((n, m), dtype=bool)
    from_diagonal = np.zeros((n, m), dtype=bool)
    above = np.full(m + 1, np.inf)  # the previous row, shifted: above[j + 1] is column j
    above[0] = 0.0  # the path enters the first cell from outside the grid
    for i in range(n):
        diagonal, straight = above[:-1], above[1:]
        entry = x[i] + np.minimum(diagonal, straight)
        prefix = np.cumsum(x[i])
        # total[j] = min over k <= j of entry[k] + x[i, k+1..j]
        offsets = entry - prefix
        best = np.minimum.accumulate(offsets)
        total[i] = prefix + best
        from_left[i, 1:] = best[:-1] < offsets[1:]
        from_diagonal[i] = diagonal <= straight
        above = np.concatenate([[np.inf], total[i]])
    rows, cols = [], []
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        rows.append(i)
        cols.append(j)
        if from_left[i, j]:
            j -= 1
        elif from_diagonal[i, j]:
            i, j = i - 1, j - 1
        else:
            i -= 1
    return np.array(rows[::-1], dtype=np.int64), np.array(cols[::-1], dtype=np.int64)


def token_onsets(matrix: NDArray[np.float32]) -> NDArray[np.int64]:
    """The frame where the best path first reaches each row of `matrix` [N, M]."""
    rows, cols = dtw_path(-matrix)
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    return cols[first]


def split_words(
    tokens: Sequence[int], piece: Callable[[Sequence[int]], bytes], spaced: bool
) -> list[WordTokens]:
    """Words of text `tokens`: tokens grouped until their bytes are whole UTF-8 characters,
    then (`spaced`) joined until the next leading space or punctuation mark; punctuation
    then joins its neighbour (`merge_punctuation`)."""
    groups: list[WordTokens] = []
    pending: list[int] = []
    for token in tokens:
        pending.append(token)
        try:
            text = piece(pending).decode("utf-8")
        except UnicodeDecodeError:
            continue
        groups.append(WordTokens(text, tuple(pending)))
        pending = []
    if pending:
        groups.append(WordTokens(piece(pending).decode("utf-8", "replace"), tuple(pending)))
    if not spaced:
        return merge_punctuation(groups)
    words: list[WordTokens] = []
    for group in groups:
        starts = group.text.startswith(" ") or _is_punctuation(group.text)
        if words and not starts and not _is_punctuation(words[-1].text):
            last = words[-1]
            words[-1] = WordTokens(last.text + group.text, last.tokens + group.tokens)
        else:
            words.append(group)
    return merge_punctuation(words)


def _is_punctuation(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not any(ch.isalnum() for ch in stripped)


def merge_punctuation(words: list[WordTokens]) -> list[WordTokens]:
    """Opening marks join the next word, every other mark the word before it."""
    merged: list[WordTokens] = []
    carry: WordTokens | None = None
    for word in words:
        if carry is not None:
            word = WordTokens(carry.text + word.text.lstrip(), carry.tokens + word.tokens)
            carry = None
        if _is_punctuation(word.text) and word.text.strip()[0] in _OPENING:
            carry = word
        elif _is_punctuation(word.text) and merged:
            last = merged[-1]
            merged[-1] = WordTokens(last.text + word.text.strip(), last.tokens + word.tokens)
        else:
            merged.append(word)
    if carry is not None:
        merged.append(carry)
    return merged


def word_spans(words: Sequence[WordTokens], onsets: NDArray[np.int64]) -> list[tuple[float, float]]:
    """(start, end) seconds of each word from the onsets of its tokens' rows; `onsets` has
    one more row than the words have tokens (the end of text, where the last word ends)."""
    spans: list[tuple[float, float]] = []
    at = 0
    for word in words:
        after = at + len(word.tokens)
        start, end = onsets[at] * SECONDS_PER_FRAME, onsets[after] * SECONDS_PER_FRAME
        spans.append((float(start), float(max(end, start))))
        at = after
    return spans


def trailing_marks(word: WordTokens, piece: Callable[[Sequence[int]], bytes]) -> int:
    """How many of the word's last tokens are punctuation alone (none when all are: a word
    keeps at least one token)."""
    count = 0
    for k in range(1, len(word.tokens)):
        try:
            text = piece(word.tokens[-k:]).decode("utf-8")
        except UnicodeDecodeError:
            continue  # a character cut in two: a longer suffix may be whole
        if not _is_punctuation(text):
            break
        count = k
    return count


def sound_onsets(voiced: NDArray[np.bool_], quiet: int = QUIET_FRAMES) -> NDArray[np.int64]:
    """Frames where sound begins after at least `quiet` frames without (or at the start)."""
    starts: list[int] = []
    silent = quiet
    for frame, loud in enumerate(voiced):
        if loud and silent >= quiet:
            starts.append(frame)
        silent = 0 if loud else silent + 1
    return np.array(starts, dtype=np.int64)


def starts_after_marks(
    words: Sequence[WordTokens],
    marks: Sequence[int],
    onsets: NDArray[np.int64],
    voiced: NDArray[np.bool_],
) -> NDArray[np.int64]:
    """`onsets` with each word after punctuation starting where sound begins under that
    punctuation's rows, if it does: a mark makes no sound, so sound that begins while the
    path is on it is the next word, which the alignment then places late (whisper-tiny.en
    does so at the pause after a sentence: it waits on the full stop or comma through the
    next word's first syllables). `marks[i]`: the trailing punctuation tokens of word i."""
    moved = onsets.copy()
    begins = sound_onsets(voiced)
    at = 0
    for number, (word, count) in enumerate(zip(words, marks, strict=True)):
        after = at + len(word.tokens)
        if count and number + 1 < len(words):
            first, last = moved[after - count], moved[after]
            inside = begins[(begins > first) & (begins < last)]
            if len(inside):
                moved[after] = inside[0]
        at = after
    return moved


def voiced_frames(
    samples: NDArray[np.float32], rate: int, quiet_db: float = 40.0
) -> NDArray[np.bool_]:
    """Per 20 ms frame: is there sound (within `quiet_db` of the loudest frame, above digital
    silence)?"""
    size = int(rate * SECONDS_PER_FRAME)
    count = len(samples) // size
    frames = samples[: count * size].astype(np.float64).reshape(count, size)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    if not count or rms.max() <= 0:
        return np.zeros(count, dtype=bool)
    floor = max(rms.max() * 10 ** (-quiet_db / 20), 1e-4)
    voiced: NDArray[np.bool_] = rms >= floor
    return voiced


def snap_to_sound(
    spans: Sequence[tuple[float, float]], voiced: NDArray[np.bool_]
) -> list[tuple[float, float]]:
    """Each (start, end) narrowed to the sound within it: the alignment gives a pause to
    one of the words beside it, but a word starts and ends where there is sound. A span
    with no sound in it is kept as it is."""
    snapped: list[tuple[float, float]] = []
    for start, end in spans:
        first, last = round(start / SECONDS_PER_FRAME), round(end / SECONDS_PER_FRAME)
        inside = np.flatnonzero(voiced[first:last])
        if len(inside):
            start = (first + int(inside[0])) * SECONDS_PER_FRAME
            end = (first + int(inside[-1]) + 1) * SECONDS_PER_FRAME
        snapped.append((start, end))
    return snapped
