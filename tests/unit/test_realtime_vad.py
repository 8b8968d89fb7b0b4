"""Server VAD's arithmetic: the edges of a turn in window probabilities with OpenAI's
`server_vad` settings, and the settings as a session update gives them."""

from __future__ import annotations

from typing import Any

import pytest

from workers.core.catalog import SttModel
from workers.doors.api.realtime_events import (
    EventError,
    ServerVad,
    SessionConfig,
    session_object,
    updated,
)
from workers.doors.api.realtime_vad import Edge, EdgeKind, TurnWatch

pytestmark = pytest.mark.unit

WINDOW_S = 0.032


def edges(vad: ServerVad, probabilities: list[float]) -> list[Edge]:
    return TurnWatch(vad, WINDOW_S).scores(probabilities)


def test_a_turn_starts_with_its_padding_and_ends_after_its_silence() -> None:
    speech = [0.1] * 50 + [0.9] * 40 + [0.05] * 30  # speech from window 50 (1.6 s)
    found = edges(ServerVad(prefix_padding_ms=300, silence_duration_ms=500), speech)
    assert found == [Edge(EdgeKind.STARTED, 1300), Edge(EdgeKind.STOPPED, 106 * 32)]
    # the quiet began at window 90 (2880 ms); 500 ms of it end within window 105


def test_hysteresis_keeps_a_turn_through_probabilities_just_under_the_threshold() -> None:
    speech = [0.9] * 10 + [0.4] * 40 + [0.9] * 5 + [0.0] * 20
    found = edges(ServerVad(silence_duration_ms=200), speech)
    assert [e.kind for e in found] == [EdgeKind.STARTED, EdgeKind.STOPPED]
    assert found[0].at_ms == 0  # padding never reaches before the first sample
    assert found[1].at_ms == ((55 + 7) * 32)  # 200 ms of real quiet after window 55


def test_two_utterances_give_two_turns_however_the_windows_arrive() -> None:
    speech = ([0.0] * 20 + [0.8] * 30) * 2 + [0.0] * 30
    watch = TurnWatch(ServerVad(), WINDOW_S)
    found = [
        edge
        for start in range(0, len(speech), 7)
        for edge in watch.scores(speech[start : start + 7])
    ]
    assert found == edges(ServerVad(), speech)
    assert [e.kind for e in found] == [EdgeKind.STARTED, EdgeKind.STOPPED] * 2


MODEL = SttModel(id="whisper-tiny.en", multilingual=False, word_timestamps=False)


def update(detection: Any, vad_ready: bool = True) -> tuple[SessionConfig, EventError | None]:
    event = {
        "session": {"type": "transcription", "audio": {"input": {"turn_detection": detection}}}
    }
    return updated(SessionConfig(), MODEL, event, False, vad_ready)


def test_server_vad_settings_are_taken_and_shown() -> None:
    detection = {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200,
                 "silence_duration_ms": 400, "create_response": False}  # fmt: skip
    config, refusal = update(detection)
    assert refusal is None
    assert config.vad == ServerVad(0.6, 200, 400)
    shown = session_object("sess_1", config, False)["audio"]["input"]["turn_detection"]
    assert shown == {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200,
                     "silence_duration_ms": 400}  # fmt: skip
    assert update({"type": "server_vad"})[0].vad == ServerVad()


@pytest.mark.parametrize(
    ("detection", "ready", "code"),
    [
        ({"type": "server_vad"}, False, "unsupported_turn_detection"),
        ({"type": "semantic_vad"}, True, "unsupported_turn_detection"),
    ],
)
def test_turn_detection_that_cannot_be_had_is_refused_and_commits_stay(
    detection: dict[str, Any], ready: bool, code: str
) -> None:
    config, refusal = update(detection, ready)
    assert refusal is not None and refusal.code == code
    assert config.vad is None


def test_a_bad_threshold_is_refused_and_commits_stay() -> None:
    config, refusal = update({"type": "server_vad", "threshold": 2})
    assert refusal is not None and refusal.code == "invalid_value"
    assert refusal.param == "session.audio.input.turn_detection.threshold"
    assert config.vad is None
