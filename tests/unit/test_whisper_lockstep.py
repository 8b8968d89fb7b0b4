"""Windows decoded in lockstep: the greedy choices, the rows leaving the batch and the
windows read again are the same as decoding each alone (a scripted decoder, no model)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numpy.typing import NDArray

from pipelines.engines.whisper_features import WhisperMeta
from pipelines.engines.whisper_greedy import Cross, GreedyRow, decode_in_lockstep
from pipelines.speech.batches import Decoded, in_lockstep, side_by_side
from pipelines.speech.transcript import Segment

pytestmark = pytest.mark.unit

EOT, SOT, TS = 10, 11, 16  # text tokens below EOT; timestamps from TS on
META = WhisperMeta(
    n_mels=80, n_text_layer=1, n_text_ctx=64, n_text_state=4, n_vocab=TS + 60, sot=SOT,
    eot=EOT, no_timestamps=TS - 1, transcribe=12, translate=13, multilingual=False,
    languages={}, no_speech=14, blank=9, suppressed=(12, 13, 14),
)  # fmt: skip
# What each window "says": a piece opening and closing on timestamps, of its own length.
SCRIPTS = [
    [TS, 1, 2, 3, TS + 20, EOT],
    [TS + 2, 4, TS + 8, TS + 8, 5, 6, 7, 8, TS + 30, EOT],
    [TS, 7, TS + 5, EOT],
]
PROMPT = [SOT]


def scripted_step(
    tokens: NDArray[np.int64], offset: int, cache: NDArray[np.float32], cross: Cross
) -> NDArray[np.float32]:
    """Logits that make each row say its script; the row is told by its encoder output,
    and what it decoded before must be in its cache rows (or the batch lost track)."""
    rows = cross["cross_k0"][:, 0, 0].astype(int)
    assert tokens.shape[0] == len(rows) == cache.shape[1]
    end = offset + tokens.shape[1]
    cache[:, :, offset:end, 0] = tokens
    logits = np.zeros((len(rows), META.n_vocab), np.float32)
    for j, row in enumerate(rows):
        history = [*PROMPT, *SCRIPTS[row]][:end]
        assert list(cache[0, j, :end, 0].astype(int)) == history
        logits[j, SCRIPTS[row][end - len(PROMPT)]] = 30.0
    return logits


def decode(rows: list[int]) -> list[list[int]]:
    cross = {"cross_k0": np.array(rows, np.float32).reshape(-1, 1, 1)}
    cache = np.zeros((2, len(rows), META.n_text_ctx, META.n_text_state), np.float32)
    suppressed = np.array(META.suppressed, dtype=np.int64)
    greedy = [GreedyRow(META, suppressed, budget=20) for _ in rows]
    return [d.tokens for d in decode_in_lockstep(greedy, PROMPT, cross, cache, scripted_step)]


def test_rows_decoded_together_choose_what_each_chooses_alone() -> None:
    alone = [decode([row])[0] for row in range(len(SCRIPTS))]
    assert alone == [script[:-1] for script in SCRIPTS]
    # Rows end at different steps and leave the batch; the others keep their own cache.
    assert decode([0, 1, 2]) == alone
    assert decode([2, 0, 1, 2]) == [alone[2], alone[0], alone[1], alone[2]]


def test_a_row_stops_at_its_budget_while_the_others_go_on() -> None:
    cross = {"cross_k0": np.array([1, 1], np.float32).reshape(-1, 1, 1)}
    cache = np.zeros((2, 2, META.n_text_ctx, META.n_text_state), np.float32)
    suppressed = np.array(META.suppressed, dtype=np.int64)
    rows = [GreedyRow(META, suppressed, budget=2), GreedyRow(META, suppressed, budget=20)]
    short, whole = decode_in_lockstep(rows, PROMPT, cross, cache, scripted_step)
    assert short.tokens == [TS + 2, 4, TS + 8, TS + 8, 5]  # two text tokens, then no more
    assert whole.tokens == SCRIPTS[1][:-1]


RATE = 100


def fake_window(samples: NDArray[np.float32]) -> Decoded:
    """Reads up to the first sample marked 2.0 (where 'the text stopped'), one piece."""
    stops = np.flatnonzero(samples[1:] == 2.0)
    used = (int(stops[0]) + 1) if len(stops) else len(samples)
    piece = Segment(0.0, used / RATE, f"{len(samples)}")
    return (piece,), used / RATE, "en"


def test_windows_read_in_lockstep_are_read_as_side_by_side() -> None:
    windows = [np.ones(n, np.float32) for n in (500, 300, 800)]
    windows[0][200] = windows[0][350] = windows[2][150] = 2.0
    windows[1][:] = 0.0  # digital silence: never decoded
    calls: list[int] = []

    def batch(rests: list[NDArray[np.float32]]) -> list[Decoded]:
        calls.append(len(rests))
        return [fake_window(rest) for rest in rests]

    together = in_lockstep(batch, windows, RATE)
    with ThreadPoolExecutor(2) as pool:
        apart = side_by_side(pool, fake_window, windows, RATE)
    assert together == apart
    assert calls == [2, 2, 1]  # every window still being read, in one call each round
    assert [p.start for p in together[0][0]] == [0.0, 2.0, 3.5]
    assert together[1] == ((), 3.0, "")
