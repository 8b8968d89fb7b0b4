"""Speech regions laid end to end, read in windows, timed back to the audio."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.speech.stt import timed_segments
from pipelines.speech.transcript import Segment
from pipelines.speech.windows import SpeechTimeline, split_phrase

pytestmark = pytest.mark.unit

RATE = 100  # one sample per 10 ms keeps the arithmetic readable


def region(seconds: float, value: float) -> np.ndarray:
    return np.full(int(seconds * RATE), value, np.float32)


def test_regions_apart_in_the_audio_are_laid_out_with_a_short_silence_between() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.5)
    timeline.add(2.0, region(1.0, 1.0))
    timeline.add(10.0, region(2.0, 2.0))
    assert timeline.held_s == pytest.approx(3.5)
    laid = timeline.window(30.0)
    assert list(laid[:100]) == [1.0] * 100
    assert not laid[100:150].any()  # the gap is silence
    assert list(laid[150:]) == [2.0] * 200


def test_contiguous_pieces_get_no_gap() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.5)
    timeline.add(0.0, region(1.0, 1.0))
    timeline.add(1.0, region(1.0, 2.0))
    assert timeline.held_s == pytest.approx(2.0)


def test_laid_out_positions_map_back_to_audio_time() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.5)
    timeline.add(2.0, region(1.0, 1.0))
    timeline.add(10.0, region(2.0, 2.0))
    assert timeline.to_time(0) == pytest.approx(2.0)
    assert timeline.to_time(50) == pytest.approx(2.5)
    assert timeline.to_time(200) == pytest.approx(10.5)
    # In the gap, a start moves on to the next region and an end back to the previous one.
    assert timeline.to_time(120) == pytest.approx(10.0)
    assert timeline.to_time(120, end=True) == pytest.approx(3.0)
    assert timeline.to_time(10_000, end=True) == pytest.approx(12.0)


def test_windows_read_from_the_front_and_consuming_drops_what_was_read() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.0)
    timeline.add(0.0, region(1.0, 1.0))
    timeline.add(5.0, region(1.0, 2.0))
    timeline.add(9.0, region(1.0, 3.0))
    assert len(timeline.window(1.5)) == 150
    timeline.consume(1.5)
    assert timeline.position == 150
    assert timeline.held_s == pytest.approx(1.5)
    assert list(timeline.window(30.0)) == [2.0] * 50 + [3.0] * 100
    assert timeline.to_time(timeline.position) == pytest.approx(5.5)
    timeline.consume(0.0)  # always advances, so a reader cannot loop on one window
    assert timeline.position == 151
    timeline.consume(30.0)
    assert timeline.held_s == 0.0 and len(timeline.window(30.0)) == 0


def test_silence_added_after_a_region_is_read_but_times_stay_within_the_audio() -> None:
    timeline = SpeechTimeline(RATE)
    timeline.add(0.0, region(3.0, 1.0), silence_s=2.0)
    assert timeline.held_s == pytest.approx(5.0)
    assert not timeline.window(30.0)[300:].any()
    assert timeline.to_time(450, end=True) == pytest.approx(3.0)


def test_pauses_are_found_only_between_regions_apart_in_the_audio() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.5)
    timeline.add(0.0, region(1.0, 1.0))
    timeline.add(1.0, region(1.0, 1.0))  # continues the first: no pause
    timeline.add(5.0, region(1.0, 1.0))
    assert timeline.pauses_within(0, 350) == [(200, 250)]
    assert timeline.pauses_within(0, 250) == []  # ends before the speech resumes
    assert timeline.pauses_within(210, 350) == []  # starts in the laid-out silence


@pytest.mark.parametrize(
    ("text", "fraction", "expected"),
    [
        ("The ferry left. A cold wind blew.", 0.45, ("The ferry left.", "A cold wind blew.")),
        # A sentence's end within a quarter of the text wins over a nearer word gap.
        ("The ferry left early. A cold wind", 0.5, ("The ferry left early.", "A cold wind")),
        ("The ferry left early. A cold wind", 0.3, ("The ferry", "left early. A cold wind")),
        ("Bring the contract, and the pen", 0.6, ("Bring the contract,", "and the pen")),
        ("one two three four", 0.5, ("one two", "three four")),
        ("今天天气很好。我们去公园", 0.4, ("今天天气很好。", "我们去公园")),
        ("今天天气很好我们去公园", 0.5, ("今天天气很好", "我们去公园")),
        ("word", 0.2, ("", "word")),
        ("word", 0.8, ("word", "")),
    ],
)
def test_a_phrase_is_cut_where_the_speaker_paused(
    text: str, fraction: float, expected: tuple[str, str]
) -> None:
    assert split_phrase(text, fraction) == expected


def test_a_phrase_over_a_pause_becomes_one_segment_per_side() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.3)
    timeline.add(10.0, region(2.0, 1.0))  # laid out at 0..200
    timeline.add(20.0, region(2.0, 1.0))  # laid out at 230..430
    first, second = timed_segments(
        timeline, Segment(0, 0, "The ferry left. A cold wind blew."), 20, 400
    )
    assert (first.start, first.end, first.text) == (10.2, 12.0, "The ferry left.")
    assert (second.start, second.end, second.text) == (20.0, 21.7, "A cold wind blew.")


def test_a_phrase_that_overlaps_a_pause_by_timestamp_slop_is_not_cut() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.3)
    timeline.add(10.0, region(2.0, 1.0))
    timeline.add(20.0, region(2.0, 1.0))
    (only,) = timed_segments(
        timeline, Segment(0, 0, "A cold wind blew."), 180, 400
    )  # 0.2 s before the pause
    assert (only.start, only.end, only.text) == (20.0, 21.7, "A cold wind blew.")
    (early,) = timed_segments(timeline, Segment(0, 0, "The ferry left."), 20, 260)  # 0.3 s after it
    assert (early.start, early.end, early.text) == (10.2, 12.0, "The ferry left.")


def test_windows_read_side_by_side_are_cut_where_a_region_ends() -> None:
    timeline = SpeechTimeline(RATE, gap_s=0.5)
    timeline.add(0.0, region(10.0, 1.0))  # laid out at 0-10 s
    timeline.add(20.0, region(12.0, 2.0))  # at 10.5-22.5 s
    timeline.add(40.0, region(8.0, 3.0))  # at 23-31 s
    timeline.add(50.0, region(40.0, 4.0))  # at 31.5-71.5 s: longer than any window
    # Each window ends where the next region starts (its gap read with it) as late as 28 s
    # allow; a region longer than a window is cut at 28 s.
    assert timeline.cuts(28.0, 10) == [2300, 850, 2800, 1200]
    assert timeline.cuts(28.0, 2) == [2300, 850]
    laid = timeline.front(3100)
    assert len(laid) == 3100 and laid[2249] == 2.0 and laid[2250] == 0.0  # the gap follows
    assert timeline.position == 0  # nothing consumed
