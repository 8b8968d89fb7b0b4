"""Transcripts that tell the truth: Mandarin in the script asked for, silence that is never
decoded, times from where the speech starts, and whisper's decoding figures kept from the
window to the job result and OpenAI's verbose_json."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.engines.chinese_script import script_converter
from pipelines.engines.registry import chinese_writer
from pipelines.engines.whisper import compression_ratio
from pipelines.engines.whisper_timestamps import split_window
from pipelines.errors import PermanentError
from pipelines.speech.audio import write_wav
from pipelines.speech.chinese_script import split_language
from pipelines.speech.config import SttConfig
from pipelines.speech.stt import leading_silence, transcribe
from pipelines.speech.transcript import Segment, Transcript
from workers.core.stage_configs import stt_keyed, stt_options
from workers.doors.api.transcribe import verbose

pytestmark = pytest.mark.unit

RATE = 16_000
ANNOUNCED = {"version": "v3", "language": "", "script": "simplified"}


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("zh", ("zh", None)),
        ("zh-CN", ("zh", "simplified")),
        ("zh-Hans", ("zh", "simplified")),
        ("zh_SG", ("zh", "simplified")),
        ("zh-Hant", ("zh", "traditional")),
        ("zh-TW", ("zh", "traditional-tw")),
        ("zh-HK", ("zh", "traditional-hk")),
        ("en-US", ("en", None)),
        ("yue", ("yue", None)),
    ],
)
def test_a_language_tag_is_whispers_language_and_the_script_it_names(
    tag: str, expected: tuple[str, str | None]
) -> None:
    assert split_language(tag) == expected


def test_a_chinese_tag_picks_the_script_and_keys_its_own_job() -> None:
    assert stt_options({"language": "zh-TW"}) == {"language": "zh", "script": "traditional-tw"}
    assert stt_options({"language": "zh-Hant"}) == {"language": "zh", "script": "traditional"}
    assert stt_options({"language": "en-US"}) == {"language": "en"}
    # The default script is the worker's: zh-CN is the same job as zh; zh-Hant is another.
    plain = stt_keyed(ANNOUNCED, {"language": "zh"})
    assert stt_keyed(ANNOUNCED, {"language": "zh-CN"}) == plain
    assert stt_keyed(ANNOUNCED, {"language": "zh-Hant"}) != plain
    with pytest.raises(PermanentError, match="Chinese script 'klingon' is not one of"):
        stt_options({"script": "klingon"})


def test_opencc_writes_mandarin_in_each_script() -> None:
    simplified, traditional = script_converter("simplified"), script_converter("traditional")
    assert simplified is not None and traditional is not None
    assert simplified("今天天氣很好，我們去公園散步") == "今天天气很好，我们去公园散步"
    assert traditional("今天天气很好") == "今天天氣很好"
    taiwan = chinese_writer("traditional-tw")
    assert taiwan is not None and taiwan("头发里面") == "頭髮裡面"
    assert chinese_writer("as-is") is None


def test_decoding_figures_survive_the_job_result_and_reach_verbose_json() -> None:
    segment = Segment(
        8.12,
        11.4,
        "Please send the report.",
        tokens=(50364, 4, 5, 6, 50530),
        seek=790,
        avg_logprob=-0.21,
        compression_ratio=1.05,
        no_speech_prob=0.013,
    )
    transcript = Transcript("Please send the report.", (segment,), "en", 12.0, 0.4)
    back = Transcript.from_dict(transcript.to_dict())
    assert back.segments == (segment,)
    (shown,) = verbose(back, "transcribe")["segments"]
    assert shown["tokens"] == [50364, 4, 5, 6, 50530] and shown["seek"] == 790
    assert (shown["avg_logprob"], shown["compression_ratio"]) == (-0.21, 1.05)
    assert shown["no_speech_prob"] == 0.013 and shown["start"] == 8.12


def test_compression_ratio_is_whispers_zlib_ratio() -> None:
    assert compression_ratio("") == 0.0
    assert compression_ratio("Please send the report.") < 1.5
    assert compression_ratio(" ".join(["."] * 30)) > 2.4  # a loop on one token


def test_leading_digital_silence_is_measured_up_to_a_short_lead_in() -> None:
    audio = np.zeros(RATE * 10, np.float32)
    assert leading_silence(audio, RATE) == len(audio)  # nothing but silence
    audio[8 * RATE :] = 0.1
    assert leading_silence(audio, RATE) == int(7.7 * RATE)
    audio[: RATE // 10] = 0.1  # sound within the lead-in: nothing to skip
    assert leading_silence(audio, RATE) == 0


class _Heard:
    """A recognizer that says one phrase over whatever window it is given and records the
    windows: what the loop feeds the decoder is what is under test."""

    sample_rate = RATE

    def __init__(self) -> None:
        self.windows: list[np.ndarray] = []

    def transcribe(self, samples: np.ndarray) -> str:
        return "words"

    def recognise_window(
        self, samples: np.ndarray, language: str = ""
    ) -> tuple[tuple[Segment, ...], float, str]:
        self.windows.append(samples)
        seconds = len(samples) / RATE
        return (Segment(0.0, seconds, "今天天氣很好", tokens=(1, 2)),), seconds, "zh"


@pytest.mark.parametrize("seconds", [5, 8, 12, 40])
def test_digital_silence_of_any_length_is_never_decoded(tmp_path: Path, seconds: int) -> None:
    wav = write_wav(tmp_path / "quiet.wav", np.zeros(RATE * seconds, np.float32), RATE)
    heard = _Heard()
    transcript = transcribe(wav, heard, SttConfig(tmp_path))
    assert heard.windows == []
    assert (transcript.text, transcript.segments) == ("", ())
    assert transcript.note == "no speech detected"


def test_speech_after_silence_is_timed_from_where_it_starts(tmp_path: Path) -> None:
    audio = np.zeros(RATE * 14, np.float32)
    audio[8 * RATE :] = 0.05 * np.sin(np.arange(6 * RATE) * 2 * np.pi * 220 / RATE)
    wav = write_wav(tmp_path / "late.wav", audio, RATE)
    heard = _Heard()
    transcript = transcribe(wav, heard, SttConfig(tmp_path), chinese=chinese_writer("simplified"))
    (segment,) = transcript.segments
    assert segment.start == pytest.approx(8.0, abs=0.5)
    assert segment.seek == round(segment.start * 100) and segment.tokens == (1, 2)
    assert transcript.text == "今天天气很好"  # written in Simplified
    # The decoder heard the speech from 0.3 s before it, then the one-pass silence after it.
    (window,) = heard.windows
    assert len(window) == pytest.approx(8.3 * RATE, abs=2)


def test_each_piece_keeps_the_tokens_whisper_wrote_for_it() -> None:
    begin, eot = 100, 99  # timestamps from 100 up; text below the end of text
    window = split_window([100, 1, 2, 150, 150, 3, 170], begin, eot)
    assert [p.written for p in window.pieces] == [(100, 1, 2, 150), (150, 3, 170)]
