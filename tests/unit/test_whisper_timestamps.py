"""whisper's timestamp rules and how a window's tokens become pieces and a seek."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.engines.whisper_timestamps import (
    MAX_INITIAL_TIMESTAMP,
    TimedTokens,
    apply_timestamp_rules,
    split_window,
)

pytestmark = pytest.mark.unit

# A toy vocabulary laid out like whisper's: text 0..99, end of text 100, other specials,
# <|notimestamps|> 109, then timestamps from 110 (one per 20 ms).
EOT, TS = 100, 110
VOCAB = TS + 1501


def ts(position: int) -> int:
    return TS + position


def words_likelier() -> np.ndarray:
    """Logits where text and the end are each far likelier than any timestamp."""
    logits = np.full(VOCAB, -30.0, np.float32)
    logits[:TS] = 0.0
    return logits


def allowed(sampled: list[int], logits: np.ndarray | None = None) -> set[int]:
    values = words_likelier() if logits is None else logits.copy()
    apply_timestamp_rules(values, sampled, TS, EOT)
    return {int(i) for i in np.flatnonzero(np.isfinite(values))}


def test_a_window_opens_on_a_timestamp_within_its_first_second() -> None:
    assert allowed([]) == {ts(i) for i in range(MAX_INITIAL_TIMESTAMP + 1)}


def test_after_a_pair_comes_text_or_the_end_never_a_timestamp() -> None:
    after = allowed([ts(0), 5, 6, ts(40), ts(40)])
    assert 5 in after and EOT in after
    assert not any(t >= TS for t in after)
    assert TS - 1 not in after  # <|notimestamps|> is never chosen


def test_after_text_and_its_closing_timestamp_comes_another_one_or_the_end() -> None:
    after = allowed([ts(0), 5, 6, ts(40)])
    assert not any(t < EOT for t in after)  # no text
    assert EOT in after
    assert ts(39) not in after and ts(40) in after and ts(41) in after  # never backwards


def test_within_text_timestamps_only_move_forward() -> None:
    after = allowed([ts(10), 5])
    assert ts(10) not in after and ts(11) in after and 7 in after


def test_timestamps_likelier_together_than_any_word_force_a_timestamp() -> None:
    logits = np.full(VOCAB, -30.0, np.float32)
    logits[5] = 0.0  # the likeliest single token is a word...
    logits[ts(11) : ts(31)] = -1.0  # ...but twenty timestamps together outweigh it
    after = allowed([ts(10), 5], logits)
    assert not any(t < TS for t in after)
    logits[ts(11) : ts(31)] = -10.0  # now they do not
    assert 5 in allowed([ts(10), 5], logits)


def test_closed_pieces_split_at_pairs_and_a_single_ending_uses_the_whole_window() -> None:
    tokens = [ts(0), 1, 2, ts(150), ts(160), 3, ts(300)]
    window = split_window(tokens, TS, EOT)
    assert window.pieces == (TimedTokens(0, 150, (1, 2)), TimedTokens(160, 300, (3,)))
    assert window.seek is None


def test_a_piece_cut_off_by_the_window_is_dropped_and_read_again_from_the_last_pair() -> None:
    tokens = [ts(0), 1, 2, ts(150), ts(160), 3, 4]  # the budget or window ended inside a piece
    window = split_window(tokens, TS, EOT)
    assert window.pieces == (TimedTokens(0, 150, (1, 2)),)
    assert window.seek == 150
    ended_on_a_pair = split_window([ts(0), 1, ts(150), ts(150)], TS, EOT)
    assert ended_on_a_pair.seek == 150


def test_one_piece_without_a_closing_timestamp_runs_to_the_window_end() -> None:
    assert split_window([ts(20), 1, 2], TS, EOT).pieces == (TimedTokens(20, None, (1, 2)),)
    assert split_window([ts(20), 1, ts(90)], TS, EOT).pieces == (TimedTokens(20, 90, (1,)),)
    assert split_window([], TS, EOT).pieces == ()


def test_a_seek_to_the_window_start_would_not_advance_so_the_window_is_used_whole() -> None:
    window = split_window([ts(0), ts(0), 1, 2], TS, EOT)
    assert window.seek is None
