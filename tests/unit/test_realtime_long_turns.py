"""Server VAD on speech without a pause: a turn that reaches the buffer's bound or the longest
turn ends there and the speech goes on as the next turn, nothing refused and nothing lost;
manual commits keep the refusal. The session's own logic, its scorer a loudness twin of the
VAD port (a loud window is speech) and its socket a list of the events sent."""

from __future__ import annotations

import json
from base64 import b64encode
from pathlib import Path
from typing import Any, cast

import anyio
import numpy as np
import pytest
from starlette.websockets import WebSocket

from workers.core.settings import Settings
from workers.doors.api.context import ApiContext
from workers.doors.api.realtime import PENDING_TURNS, Session, _answer
from workers.doors.api.realtime_events import EventError, ServerVad, SessionConfig
from workers.doors.api.realtime_turns import Turn
from workers.doors.api.realtime_vad import EdgeKind, TurnWatch
from workers.gateways.inline import InlineGateway

pytestmark = pytest.mark.unit

RATE = 16_000
WINDOW_S = 0.032
CHUNK = RATE // 10  # samples a 100 ms append holds


class Loudness:
    """`SpeechScores` by loudness: a window whose mean level passes 1000 is speech."""

    window_s = WINDOW_S

    def __init__(self) -> None:
        self.held = np.zeros(0, np.int16)

    def feed(self, pcm16: bytes) -> list[float]:
        self.held = np.concatenate([self.held, np.frombuffer(pcm16, "<i2")])
        size = int(RATE * WINDOW_S)
        count = len(self.held) // size
        windows = np.abs(self.held[: count * size].astype(np.int32)).reshape(count, size)
        self.held = self.held[count * size :]
        return [0.9 if level > 1000 else 0.0 for level in windows.mean(axis=1)]


class Scoring:
    def open(self, rate: int) -> Loudness:
        assert rate == RATE
        return Loudness()


class Socket:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))


def speech(seconds: float) -> np.ndarray[Any, np.dtype[np.int16]]:
    """A loud tone whose samples count up, so that each one says where it was spoken."""
    count = int(RATE * seconds)
    return ((np.arange(count) % 2000) + 4000).astype(np.int16) * np.where(
        np.arange(count) % 2, 1, -1
    ).astype(np.int16)


def talk(
    settings: Settings, pcm: np.ndarray[Any, np.dtype[np.int16]], vad: ServerVad | None
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Append `pcm` 100 ms at a time: the events sent, and the turns queued."""
    ctx = ApiContext(settings, key="k" * 24, gateway=InlineGateway(settings))
    socket = Socket()
    session = Session(ctx, cast(WebSocket, socket), SessionConfig(rate=RATE, vad=vad))
    session.listen(vad, Scoring() if vad else None)

    async def scenario() -> list[bytes]:
        send, receive = anyio.create_memory_object_stream[tuple[Turn, bytes]](PENDING_TURNS)
        for start in range(0, len(pcm), CHUNK):
            audio = b64encode(pcm[start : start + CHUNK].astype("<i2").tobytes()).decode()
            try:
                await _answer(session, {"type": "input_audio_buffer.append", "audio": audio}, send)
            except EventError as exc:  # as the event loop answers it: an error event
                socket.sent.append({"type": "error", "error": exc.code})
        send.close()
        async with receive:
            return [pcm async for _turn, pcm in receive]

    queued = anyio.run(scenario)
    return socket.sent, queued


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    found = Settings(home=tmp_path / "home")
    found.api.realtime_buffer_mb = 0.1  # 3.3 s at 16 kHz
    return found


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"].removeprefix("input_audio_buffer.") for e in events]


def test_speech_past_the_buffer_is_committed_in_turns_and_none_of_it_lost(
    settings: Settings,
) -> None:
    said = speech(8.0)
    quiet = np.zeros(RATE, np.int16)
    events, turns = talk(settings, np.concatenate([quiet, said, quiet]), ServerVad())
    assert "error" not in kinds(events), events
    edges = ["speech_started", "speech_stopped", "committed"]
    assert kinds(events) == edges * 3
    started, stopped = events[::3], events[1::3]
    for ended, begun in zip(stopped, started[1:], strict=False):
        assert begun["audio_start_ms"] == ended["audio_end_ms"]  # the next turn begins there
    assert 1000 - 300 - 32 <= started[0]["audio_start_ms"] <= 1000 - 300  # its padding in
    assert all(len(turn) <= settings.api.realtime_buffer_mb * 1024 * 1024 for turn in turns)
    heard = np.frombuffer(b"".join(turns), "<i2")
    at = int(np.flatnonzero(heard)[0])
    assert np.array_equal(heard[at : at + len(said)], said)  # every sample, in order, once
    assert [e["item_id"] for e in events[2::3]] == [e["item_id"] for e in started]


def test_a_turn_ends_at_the_longest_turn_before_the_buffer_is_full(settings: Settings) -> None:
    settings.api.realtime_turn_s = 1.5
    events, turns = talk(settings, np.concatenate([speech(4.0), np.zeros(RATE, np.int16)]),
                         ServerVad())  # fmt: skip
    assert kinds(events) == ["speech_started", "speech_stopped", "committed"] * 3
    assert all(len(turn) <= 1.5 * RATE * 2 for turn in turns)
    assert sum(len(turn) for turn in turns) >= 4.0 * RATE * 2


def test_manual_commits_keep_the_refusal(settings: Settings) -> None:
    events, turns = talk(settings, speech(4.0), None)
    assert kinds(events) == ["error"] * 8  # what passes the 3.28 s the buffer holds
    assert events[0]["error"] == "input_audio_buffer_too_large" and not turns


def test_a_cut_in_a_pause_waits_for_the_speech_to_start_the_next_turn() -> None:
    watch = TurnWatch(ServerVad(silence_duration_ms=500), WINDOW_S)
    watch.scores([0.9] * 10)
    assert watch.cut()  # speaking: the next turn starts at once
    watch.scores([0.9] * 3 + [0.0] * 5)  # quiet has begun, not yet long enough to stop
    assert not watch.cut()
    found = watch.scores([0.0] * 30 + [0.9])
    assert [e.kind for e in found] == [EdgeKind.STARTED]  # no stop of a turn of silence
