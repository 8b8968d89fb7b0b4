"""Speech regions laid end to end, read in windows, timed back to the audio."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.speech.windows import SpeechTimeline

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
