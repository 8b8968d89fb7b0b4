"""Greedy decoding of whisper windows under its timestamp rules: one window's choices
(`GreedyRow`), and many windows decoded in lockstep by one decoder (`decode_in_lockstep`).

In lockstep every window starts from the same prompt at the same offset and takes one token
a step, so one decoder run serves them all (the export's batch axis). A window whose text
has ended leaves the batch: the rows left are copied out of the cache and the encoder's
keys/values, so each later step computes only what is still being read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.whisper_features import WhisperMeta
from pipelines.engines.whisper_timestamps import apply_timestamp_rules

# whisper's silence rule: a window is nobody speaking when <|nospeech|> is likely at the start
# and the text decoded is not confident (its `no_speech_threshold`, `logprob_threshold`).
_NO_SPEECH_PROB = 0.6
_LOGPROB_FLOOR = -1.0

Cross = dict[str, NDArray[np.float32]]
# (tokens [rows, n], offset, cache [2 x layers, rows, context, state], cross) -> the last
# token's logits [rows, vocab]; the step writes its keys/values into the cache.
Step = Callable[[NDArray[np.int64], int, NDArray[np.float32], Cross], NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class Decoded:
    tokens: list[int]  # after the prompt, the end of text excluded
    no_speech_prob: float  # of <|nospeech|> at <|startoftranscript|>
    avg_logprob: float  # per token chosen, the end of text included

    @property
    def silent(self) -> bool:
        return self.no_speech_prob > _NO_SPEECH_PROB and self.avg_logprob <= _LOGPROB_FLOOR


@dataclass(slots=True)
class GreedyRow:
    """One window's decoding: the most likely token under whisper's timestamp rules and its
    suppressed tokens, until ``<|endoftext|>`` or `budget` text tokens."""

    meta: WhisperMeta
    suppressed: NDArray[np.int64]
    budget: int
    chosen: list[int] = field(default_factory=list)
    text: int = 0
    total_logprob: float = 0.0
    no_speech_prob: float = 0.0
    ended: bool = False

    def wants(self, offset: int, feed: int) -> bool:
        """Another step, fed `feed` tokens at `offset`, is to be taken."""
        room = offset + feed < self.meta.n_text_ctx
        return not self.ended and self.text < self.budget and room

    def choose(self, logits: NDArray[np.float32]) -> int:
        """The next token from this step's `logits` (changed in place); the end of text ends
        the row."""
        meta = self.meta
        if not self.chosen:
            self.no_speech_prob = float(_softmax(logits)[meta.no_speech])
        logits[self.suppressed] = -np.inf
        if not self.chosen:
            logits[[meta.blank, meta.eot]] = -np.inf
        apply_timestamp_rules(logits, self.chosen, meta.timestamp_begin, meta.eot)
        token = int(np.argmax(logits))
        self.total_logprob += float(np.log(_softmax(logits)[token]))
        if token == meta.eot:
            self.ended = True
        else:
            self.text += token < meta.eot
            self.chosen.append(token)
        return token

    def decoded(self) -> Decoded:
        avg = self.total_logprob / (len(self.chosen) + 1)
        return Decoded(self.chosen, self.no_speech_prob, avg)


def decode_in_lockstep(
    rows: Sequence[GreedyRow],
    prompt: list[int],
    cross: Cross,
    cache: NDArray[np.float32],
    step: Step,
) -> list[Decoded]:
    """Every row decoded, one decoder run a step for all rows still reading.

    `cross`: the encoder's outputs for all rows ([rows x heads, ...] each); `cache`: a buffer
    [2 x layers, rows, context, state]. Both shrink as rows end."""
    members = list(range(len(rows)))  # which row each batch row is
    feed = np.array([prompt] * len(rows), dtype=np.int64)
    offset = 0
    while True:
        reading = [i for i in members if rows[i].wants(offset, feed.shape[1])]
        if not reading:
            break
        if reading != members:
            keep = [members.index(i) for i in reading]
            cross = {name: _rows(value, len(members), keep) for name, value in cross.items()}
            cache = _cache_rows(cache, keep, offset)
            feed = feed[keep]
            members = reading
        logits = step(feed, offset, cache, cross)
        tokens = [rows[i].choose(logits[j]) for j, i in enumerate(members)]
        offset += feed.shape[1]
        feed = np.array(tokens, dtype=np.int64).reshape(-1, 1)
    return [row.decoded() for row in rows]


def _rows(value: NDArray[np.float32], batch: int, keep: list[int]) -> NDArray[np.float32]:
    """`keep` rows of an encoder output laid out [batch x heads, ...]."""
    split = value.reshape(batch, -1, *value.shape[1:])
    kept: NDArray[np.float32] = np.ascontiguousarray(split[keep].reshape(-1, *value.shape[1:]))
    return kept


def _cache_rows(cache: NDArray[np.float32], keep: list[int], offset: int) -> NDArray[np.float32]:
    kept = np.empty((cache.shape[0], len(keep), *cache.shape[2:]), dtype=np.float32)
    kept[:, :, :offset] = cache[:, keep, :offset]
    return kept


def _softmax(logits: NDArray[np.float32]) -> NDArray[np.float32]:
    shifted = np.exp(logits - np.max(logits))
    result: NDArray[np.float32] = shifted / np.sum(shifted)
    return result
