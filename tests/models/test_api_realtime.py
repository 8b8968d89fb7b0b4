"""OpenAI's Realtime transcription at `/v1/realtime?intent=transcription`, against a real serve
process, a real stt worker and the real whisper model, through a plain WebSocket client: two
turns in one session (24 kHz PCM16 spoken by the tts worker), two more ended by server VAD
without a commit, bad events answered in OpenAI's `error` shape with the session going on,
an append past the buffer bound, speech without a pause committed in turns at the bound
under server VAD, the older `transcription_session.update` names, the key
(header, the browsers' subprotocol, none) and the bound on sessions held at once."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
import websocket
from openai import OpenAI

from tests.support.cluster import Cluster
from tests.support.serve import DETERMINISTIC_VOICE, Served, serve, speech_door
from tests.unit.test_realtime_audio import mu_law

pytestmark = pytest.mark.models

FIRST = "The invoice was paid on Monday."
SECOND = "We will review the budget next week."
BUFFER_MB = 1
SESSIONS = 3
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"


@pytest.fixture(scope="module")
def door(
    tmp_path_factory: pytest.TempPathFactory, broker: Any, models_home: Path
) -> Iterator[tuple[Cluster, Served, OpenAI]]:
    home = tmp_path_factory.mktemp("realtime") / "home"
    env = {"MCP_MEDIA_API__REALTIME_BUFFER_MB": str(BUFFER_MB),
           "MCP_MEDIA_API__REALTIME_SESSIONS": str(SESSIONS), **DETERMINISTIC_VOICE}  # fmt: skip
    with speech_door(home, broker, models_home, {"stt": 1, "tts": 1}, **env) as found:
        yield found


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def heard(expected: str, got: str) -> float:
    want = words(expected)
    return sum(1 for w in want if w in words(got)) / len(want)


def pcm24(api: OpenAI, text: str) -> bytes:
    """Speech as OpenAI's pcm: 24 kHz s16le mono, what a Realtime session takes."""
    return api.audio.speech.create(
        model="tts-1", voice="alloy", input=text, response_format="pcm"
    ).content


def connect(served: Served, **options: Any) -> websocket.WebSocket:
    url = served.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    options.setdefault("header", [f"Authorization: Bearer {served.key}"])
    return websocket.create_connection(url, timeout=120, **options)


def send(ws: websocket.WebSocket, event: dict[str, Any]) -> None:
    ws.send(json.dumps(event))


def receive(ws: websocket.WebSocket) -> dict[str, Any]:
    found = json.loads(ws.recv())
    assert isinstance(found, dict) and isinstance(found["event_id"], str)
    return found


def append(ws: websocket.WebSocket, pcm: bytes, piece: int = 9600) -> None:
    """As a microphone sends it: 200 ms a message."""
    for start in range(0, len(pcm), piece):
        audio = base64.b64encode(pcm[start : start + piece]).decode()
        send(ws, {"type": "input_audio_buffer.append", "audio": audio})


def test_two_turns_in_one_session(door: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, api = door
    first, second = pcm24(api, FIRST), pcm24(api, SECOND)
    ws = connect(served)
    created = receive(ws)
    assert created["type"] == "session.created"
    assert created["session"]["type"] == "transcription"
    update = {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
        "turn_detection": None}}}  # fmt: skip
    send(ws, {"type": "session.update", "session": update})
    session = receive(ws)
    assert session["type"] == "session.updated"
    assert session["session"]["audio"]["input"]["transcription"]["language"] == "en"
    append(ws, first)
    send(ws, {"type": "input_audio_buffer.commit"})
    append(ws, second)  # the next turn is appended while the first one is transcribed
    send(ws, {"type": "input_audio_buffer.commit"})
    events: list[dict[str, Any]] = []
    while sum(1 for e in events if e["type"] == COMPLETED) < 2:
        events.append(receive(ws))
    ws.close()
    committed = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    assert len(committed) == 2
    assert committed[0]["previous_item_id"] is None
    assert committed[1]["previous_item_id"] == committed[0]["item_id"]
    done = [e for e in events if e["type"] == COMPLETED]
    assert [e["item_id"] for e in done] == [e["item_id"] for e in committed]  # commit order
    for event, said in zip(done, (FIRST, SECOND), strict=True):
        assert heard(said, event["transcript"]) >= 0.8, event
        deltas = [
            e["delta"] for e in events if e["type"] == DELTA and e["item_id"] == event["item_id"]
        ]
        assert deltas and "".join(deltas) == event["transcript"].strip()
        assert event["usage"]["seconds"] > 1.0
    assert not [e for e in events if e["type"] == "error"]


def test_bad_events_are_answered_in_shape_and_the_session_goes_on(
    door: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, served, api = door
    ws = connect(served)
    assert receive(ws)["type"] == "session.created"
    ws.send("{not json")
    error = receive(ws)
    assert error["type"] == "error" and error["error"]["code"] == "invalid_json"
    ws.send_binary(b"\x00\x01 audio where an event belongs")
    assert receive(ws)["error"]["code"] == "invalid_json"
    assert error["error"]["type"] == "invalid_request_error"
    send(ws, {"type": "response.create", "event_id": "evt_1"})
    error = receive(ws)["error"]
    assert (error["param"], error["event_id"]) == ("type", "evt_1")
    send(ws, {"type": "input_audio_buffer.commit", "event_id": "evt_2"})
    assert receive(ws)["error"]["code"] == "input_audio_buffer_commit_empty"
    send(ws, {"type": "input_audio_buffer.append", "audio": "not base64!"})
    assert receive(ws)["error"]["code"] == "invalid_value"
    # past the buffer's bound: refused before decoding, the buffer kept as it was
    oversized = base64.b64encode(bytes(BUFFER_MB * 1024 * 1024 + 2)).decode()
    send(ws, {"type": "input_audio_buffer.append", "audio": oversized, "event_id": "evt_3"})
    error = receive(ws)["error"]
    assert (error["code"], error["event_id"]) == ("input_audio_buffer_too_large", "evt_3")
    send(ws, {"type": "session.update", "session": {"type": "realtime"}})
    assert receive(ws)["error"]["param"] == "session.type"
    # the older names, with semantic VAD asked for: the update applies, the VAD is refused
    older = {"input_audio_format": "pcm16", "turn_detection": {"type": "semantic_vad"},
             "input_audio_transcription": {"model": "whisper-1"}}  # fmt: skip
    send(ws, {"type": "transcription_session.update", "session": older})
    assert receive(ws)["type"] == "transcription_session.updated"
    assert receive(ws)["error"]["code"] == "unsupported_turn_detection"
    send(ws, {"type": "input_audio_buffer.append", "audio": base64.b64encode(bytes(100)).decode()})
    send(ws, {"type": "input_audio_buffer.clear"})
    assert receive(ws)["type"] == "input_audio_buffer.cleared"
    # and a turn still goes through after all that
    append(ws, pcm24(api, FIRST))
    send(ws, {"type": "input_audio_buffer.commit"})
    events = [receive(ws)]
    while events[-1]["type"] != COMPLETED:
        events.append(receive(ws))
    assert heard(FIRST, events[-1]["transcript"]) >= 0.8
    # a turn of silence: completed, with nothing said
    append(ws, bytes(24_000 * 2))
    send(ws, {"type": "input_audio_buffer.commit"})
    assert receive(ws)["type"] == "input_audio_buffer.committed"
    silence = receive(ws)
    assert (silence["type"], silence["transcript"]) == (COMPLETED, "")
    ws.close()


def test_server_vad_ends_each_turn_where_the_speaker_stops(
    door: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, served, api = door
    first, second = pcm24(api, FIRST), pcm24(api, SECOND)
    quiet = bytes(24_000 * 2)  # a second
    ws = connect(served)
    assert receive(ws)["type"] == "session.created"
    vad = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
           "silence_duration_ms": 500}  # fmt: skip
    update = {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": "whisper-1", "language": "en"},
        "turn_detection": vad}}}  # fmt: skip
    send(ws, {"type": "session.update", "session": update})
    assert receive(ws)["session"]["audio"]["input"]["turn_detection"] == vad
    append(ws, quiet + first + quiet + second + quiet, piece=4800)  # 100 ms a message, no commit
    events: list[dict[str, Any]] = []
    while sum(1 for e in events if e["type"] == COMPLETED) < 2:
        events.append(receive(ws))
    ws.close()
    assert not [e for e in events if e["type"] == "error"]
    edges = [e for e in events if e["type"].startswith("input_audio_buffer.")]
    kinds = ["speech_started", "speech_stopped", "committed"]
    assert [e["type"] for e in edges] == [f"input_audio_buffer.{k}" for k in kinds * 2]
    spoken_ms = []  # where each sentence is in the session's audio
    at = len(quiet)
    for pcm in (first, second):
        spoken_ms.append((at / 48, (at + len(pcm)) / 48))
        at += len(pcm) + len(quiet)
    for turn, (begins, ends) in enumerate(spoken_ms):
        started, stopped, committed = edges[turn * 3 : turn * 3 + 3]
        assert started["item_id"] == stopped["item_id"] == committed["item_id"]
        # the turn begins its padding (and a window or two) before the speech, ends past it
        assert begins - 500 <= started["audio_start_ms"] <= begins + 300
        assert ends - 300 <= stopped["audio_end_ms"] <= ends + 500 + 400
    done = [e for e in events if e["type"] == COMPLETED]
    assert [e["item_id"] for e in done] == [e["item_id"] for e in edges[2::3]]
    for event, said in zip(done, (FIRST, SECOND), strict=True):
        assert heard(said, event["transcript"]) >= 0.8, event


def test_speech_without_a_pause_is_committed_in_turns_at_the_buffers_bound(
    door: tuple[Cluster, Served, OpenAI],
) -> None:
    """Server VAD on speech longer than the buffer holds (a quarter MiB: 5.5 s at 24 kHz):
    each turn ends at the bound and the next begins there, no append refused."""
    cluster, _served, api = door
    said = (SECOND, FIRST, "The meeting moved to Thursday afternoon.", SECOND, FIRST)
    speech = b"".join(pcm24(api, text) for text in said) + bytes(24_000 * 2 * 2)
    with serve(cluster, MCP_MEDIA_API__REALTIME_BUFFER_MB="0.25") as small:
        ws = connect(small)
        assert receive(ws)["type"] == "session.created"
        vad = {"type": "server_vad", "silence_duration_ms": 1000}  # sentences' own pauses go on
        update = {"type": "transcription", "audio": {"input": {
            "transcription": {"language": "en"}, "turn_detection": vad}}}  # fmt: skip
        send(ws, {"type": "session.update", "session": update})
        assert receive(ws)["type"] == "session.updated"
        append(ws, speech, piece=4800)  # 100 ms a message, no commit
        send(ws, {"type": "input_audio_buffer.clear"})  # answered once every append is heard
        events = [receive(ws)]
        while events[-1]["type"] != "input_audio_buffer.cleared":
            events.append(receive(ws))
        committed = [e["item_id"] for e in events if e["type"] == "input_audio_buffer.committed"]
        while sum(1 for e in events if e["type"] == COMPLETED) < len(committed):
            events.append(receive(ws))
        ws.close()
    assert not [e for e in events if e["type"] == "error"], events
    edges = [e for e in events if e["type"].startswith("input_audio_buffer.speech")]
    cuts = [
        (ended, begun)
        for ended, begun in pairwise(edges)
        if ended["type"].endswith("stopped") and begun["type"].endswith("started")
        and begun["audio_start_ms"] == ended["audio_end_ms"]
    ]  # fmt: skip
    assert len(committed) >= 2 and cuts, [(e["type"], e.get("audio_end_ms")) for e in edges]
    done = [e for e in events if e["type"] == COMPLETED]
    assert [e["item_id"] for e in done] == committed  # every turn transcribed, in order
    text = " ".join(e["transcript"] for e in done)
    assert heard(" ".join(said), text) >= 0.8, text


def test_a_telephone_turn_in_mu_law(door: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, api = door
    speech = np.frombuffer(pcm24(api, SECOND), "<i2").astype(np.float64)
    narrow = speech[: len(speech) // 3 * 3].reshape(-1, 3).mean(axis=1)  # 24 kHz -> 8 kHz
    ws = connect(served)
    assert receive(ws)["type"] == "session.created"
    update = {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcmu"}}}}
    send(ws, {"type": "session.update", "session": update})
    session = receive(ws)["session"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    append(ws, mu_law(narrow), piece=1600)
    send(ws, {"type": "input_audio_buffer.commit"})
    events = [receive(ws)]
    while events[-1]["type"] != COMPLETED:
        events.append(receive(ws))
    ws.close()
    assert heard(SECOND, events[-1]["transcript"]) >= 0.8, events[-1]
    assert events[-1]["usage"]["seconds"] > 1.0


def test_a_session_ends_at_its_time_bound(door: tuple[Cluster, Served, OpenAI]) -> None:
    cluster, _served, _api = door
    with serve(cluster, MCP_MEDIA_API__REALTIME_MINUTES="0.02") as short:  # 1.2 s
        ws = connect(short)
        assert receive(ws)["type"] == "session.created"
        error = receive(ws)  # nothing sent: the session runs out
        assert (error["type"], error["error"]["code"]) == ("error", "session_expired")
        opcode, frame = ws.recv_data_frame(control_frame=True)
        ws.shutdown()  # type: ignore[no-untyped-call]  # handshake done: `close` would leak it
        assert opcode == websocket.ABNF.OPCODE_CLOSE and frame.data[:2] == (1000).to_bytes(2, "big")


def sessions_open(served: Served) -> float:
    auth = {"Authorization": f"Bearer {served.key}"}
    for line in httpx2.get(f"{served.url}/metrics", headers=auth, timeout=30).text.splitlines():
        if line.startswith("mcp_media_api_realtime_sessions "):
            return float(line.split()[1])
    raise AssertionError("no realtime sessions gauge in /metrics")


def test_the_key_and_the_bound_on_sessions(door: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, _api = door
    while sessions_open(served):  # the other tests' sessions, closed, end on the server
        time.sleep(0.05)
    for header in ([], ["Authorization: Bearer wrong"]):
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            connect(served, header=header)
        assert refused.value.status_code == 401
        assert (
            json.loads(refused.value.resp_body or b"{}")["error"]["type"] == "authentication_error"
        )
    # a page rebound to our address names its own host: refused before the key is looked at
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        connect(served, host="attacker.example")
    assert refused.value.status_code == 421
    assert json.loads(refused.value.resp_body or b"{}")["error"]["code"] == "invalid_host"
    with ExitStack() as held:
        # a browser passes the key as a subprotocol, beside `realtime`
        protocols = ["realtime", f"openai-insecure-api-key.{served.key}"]
        browser = connect(served, header=[], subprotocols=protocols)
        held.callback(browser.close)
        assert browser.getsubprotocol() == "realtime"
        assert receive(browser)["type"] == "session.created"
        for _ in range(SESSIONS - 1):
            ws = connect(served)
            held.callback(ws.close)
            assert receive(ws)["type"] == "session.created"
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            connect(served)
        assert refused.value.status_code == 429
        assert sessions_open(served) == SESSIONS
