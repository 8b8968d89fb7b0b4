"""Word times from cross-attention (`pipelines.engines.whisper_words`) on small arrays, and
the word fields of transcripts, job options and the HTTP answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipelines.engines.whisper_words import (
    WordTokens,
    dtw_path,
    median_filter,
    merge_punctuation,
    snap_to_sound,
    sound_onsets,
    split_words,
    starts_after_marks,
    token_onsets,
    trailing_marks,
    voiced_frames,
    word_spans,
)
from pipelines.errors import PermanentError
from pipelines.results import processor_version
from pipelines.speech.transcript import Segment, Transcript, Word, to_srt, to_vtt
from workers.core.stage_configs import stt_keyed, stt_options
from workers.doors.api.transcribe import openai_words

pytestmark = pytest.mark.unit


def _reference_dtw(cost: np.ndarray) -> float:
    """The cheapest path's total by plain dynamic programming, cell by cell."""
    n, m = cost.shape
    total = np.full((n + 1, m + 1), np.inf)
    total[0, 0] = 0.0
    for i, j in itertools.product(range(1, n + 1), range(1, m + 1)):
        before = min(total[i - 1, j - 1], total[i - 1, j], total[i, j - 1])
        total[i, j] = cost[i - 1, j - 1] + before
    return float(total[n, m])


@pytest.mark.parametrize("seed", range(6))
def test_dtw_path_is_the_cheapest_monotone_path(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cost = rng.random((int(rng.integers(1, 7)), int(rng.integers(1, 12))))
    rows, cols = dtw_path(cost)
    assert (rows[0], cols[0]) == (0, 0)
    assert (rows[-1], cols[-1]) == (cost.shape[0] - 1, cost.shape[1] - 1)
    steps = set(zip(np.diff(rows).tolist(), np.diff(cols).tolist(), strict=True))
    assert steps <= {(0, 1), (1, 0), (1, 1)}
    assert float(cost[rows, cols].sum()) == pytest.approx(_reference_dtw(cost))


@pytest.mark.parametrize("width", [3, 5, 7, 9])
def test_median_filter_is_the_median_of_each_reflected_window(width: int) -> None:
    x = np.random.default_rng(width).standard_normal((2, 3, 30)).astype(np.float32)
    padded = np.pad(x, [(0, 0), (0, 0), (width // 2, width // 2)], mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    assert np.array_equal(median_filter(x, width), np.median(windows, axis=-1).astype(np.float32))


def test_token_onsets_follow_where_each_token_is_loud() -> None:
    frames = np.zeros((3, 20), dtype=np.float32)
    for token, (start, end) in enumerate([(2, 6), (6, 13), (13, 20)]):
        frames[token, start:end] = 1.0
    assert token_onsets(frames).tolist() == [0, 6, 13]  # the path starts at the first frame


VOCABULARY = {
    1: b" Hello",
    2: b",",
    3: b" wor",
    4: b"ld",
    5: b"!",
    6: b' "',
    7: b"Yes",
    8: "你".encode()[:2],
    9: "你".encode()[2:],
    10: "好".encode(),
    11: "。".encode(),
}


def _piece(tokens: object) -> bytes:
    return b"".join(VOCABULARY[t] for t in tokens)  # type: ignore[attr-defined]


def test_words_join_pieces_and_keep_punctuation_with_their_word() -> None:
    words = split_words([1, 2, 3, 4, 5, 6, 7], _piece, spaced=True)
    assert [(w.text, w.tokens) for w in words] == [
        (" Hello,", (1, 2)),
        (" world!", (3, 4, 5)),
        (' "Yes', (6, 7)),
    ]


def test_unspaced_words_are_whole_characters() -> None:
    words = split_words([8, 9, 10, 11], _piece, spaced=False)
    assert [(w.text, w.tokens) for w in words] == [("你", (8, 9)), ("好。", (10, 11))]


def test_an_opening_mark_at_the_end_stays_a_word() -> None:
    words = merge_punctuation([WordTokens(" Hi", (1,)), WordTokens(" (", (2,))])
    assert [w.text for w in words] == [" Hi", " ("]


def test_word_spans_run_from_a_words_first_token_to_the_next_word() -> None:
    words = [WordTokens(" a", (1,)), WordTokens(" bc", (2, 3))]
    onsets = np.array([5, 10, 12, 30])
    assert word_spans(words, onsets) == [(0.1, 0.2), (0.2, 0.6)]


def test_spans_shrink_to_the_sound_within_them() -> None:
    samples = np.zeros(16_000, dtype=np.float32)
    samples[3200:6400] = 0.5  # sound from 0.2 s to 0.4 s
    voiced = voiced_frames(samples, 16_000)
    assert snap_to_sound([(0.0, 0.6), (0.6, 0.8)], voiced) == [
        pytest.approx((0.2, 0.4)),
        (0.6, 0.8),  # no sound inside: left alone
    ]


def test_trailing_marks_count_the_punctuation_tokens_at_a_words_end() -> None:
    assert [trailing_marks(w, _piece) for w in split_words([1, 2, 3, 4, 5], _piece, True)] == [
        1,
        1,
    ]
    assert trailing_marks(WordTokens(" world", (3, 4)), _piece) == 0
    assert trailing_marks(WordTokens("好。", (10, 11)), _piece) == 1
    assert trailing_marks(WordTokens("你", (8, 9)), _piece) == 0  # half a character is no mark
    assert trailing_marks(WordTokens(",!", (2, 5)), _piece) == 1  # a word keeps one token


def test_sound_begins_after_a_quiet_stretch_only() -> None:
    voiced = np.zeros(40, dtype=bool)
    voiced[[0, 1, 10, 11, 13, 14, 30]] = True  # 12: a gap of one frame inside a sound
    assert sound_onsets(voiced, quiet=3).tolist() == [0, 10, 30]


def test_a_word_starts_where_sound_begins_under_the_punctuation_before_it() -> None:
    words = [WordTokens(" Apple,", (1, 2)), WordTokens(" banana.", (3, 5)), WordTokens(" x", (7,))]
    voiced = np.zeros(100, dtype=bool)
    voiced[2:20] = voiced[43:60] = voiced[80:90] = True
    # The path waits on "," (row 1) from frame 25 through banana's first syllables (43-50);
    # "." (row 3) ends at 80, where x's sound begins: nothing to move there.
    onsets = np.array([0, 25, 50, 70, 80, 95])
    moved = starts_after_marks(words, [1, 1, 0], onsets, voiced)
    assert moved.tolist() == [0, 25, 43, 70, 80, 95]
    # Without punctuation before it a word keeps the start the path gives it.
    assert starts_after_marks(words, [0, 0, 0], onsets, voiced).tolist() == onsets.tolist()


def _transcript(words: tuple[Word, ...] | None) -> Transcript:
    segment = Segment(0.5, 1.5, "Hello, world!")
    return Transcript("Hello, world!", (segment,), "en", 2.0, 0.1, words=words)


def test_words_are_stored_with_the_transcript_and_written_as_cues() -> None:
    words = (Word("Hello,", 0.5, 0.9), Word("world!", 1.0, 1.5))
    transcript = _transcript(words)
    data = transcript.to_dict()
    assert data["words"] == [
        {"word": "Hello,", "start": 0.5, "end": 0.9},
        {"word": "world!", "start": 1.0, "end": 1.5},
    ]
    assert Transcript.from_dict(data) == transcript
    assert to_vtt(transcript, words=True) == (
        "WEBVTT\n\n00:00:00.500 --> 00:00:00.900\nHello,\n\n00:00:01.000 --> 00:00:01.500\nworld!\n"
    )
    assert to_srt(transcript, words=True).startswith("1\n00:00:00,500 --> 00:00:00,900\nHello,")
    assert to_vtt(transcript) == "WEBVTT\n\n00:00:00.500 --> 00:00:01.500\nHello, world!\n"


def test_a_result_without_words_reads_back_without_words() -> None:
    data = _transcript(None).to_dict()
    assert "words" not in data and Transcript.from_dict(data).words is None


def test_openai_words_carry_no_punctuation() -> None:
    transcript = _transcript((Word('"Hello,', 0.5, 0.9), Word("world!", 1.0, 1.5)))
    assert openai_words(transcript) == [
        {"word": "Hello", "start": 0.5, "end": 0.9},
        {"word": "world", "start": 1.0, "end": 1.5},
    ]


def test_timed_words_are_a_job_option_and_part_of_the_key() -> None:
    assert stt_options({"words": "1"}) == {"words": "1"}
    assert stt_options({"words": "0"}) == {}
    announced = {"version": "v1", "language": "en", "script": "simplified"}
    assert stt_keyed(announced, {"words": "1"}) != stt_keyed(announced, None)
    # Word times revised (a word after punctuation starts at the sound under it): a timed
    # result made before is not served again; other jobs keep their keys.
    assert stt_keyed(announced, {"words": "1"}) != processor_version("v1", [("words", "1")])
    assert stt_keyed(announced, {"task": "translate"}) == processor_version(
        "v1", [("task", "translate")]
    )
    assert stt_keyed(announced, {"words": ""}) == "v1"
    with pytest.raises(PermanentError, match="words 'yes' is not 1"):
        stt_options({"words": "yes"})
