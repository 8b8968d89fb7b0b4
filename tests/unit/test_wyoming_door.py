"""The Wyoming door's pieces without a process: bounded framing of hostile bytes, the
outcome table, the describe languages, streamed text cut into sentences, the address rule."""

from __future__ import annotations

import asyncio
import json

import pytest
from wyoming.event import Event

from pipelines.outcomes import Outcome
from workers.core.catalog import Catalog
from workers.core.outcomes import Failure
from workers.doors.listen import ListenError
from workers.doors.wyoming.describe import info_of, wyoming_language
from workers.doors.wyoming.framing import FrameError, read_event
from workers.doors.wyoming.limits import Limits
from workers.doors.wyoming.outcomes import ADVICE, error_event
from workers.doors.wyoming.server import Address, Scheme, check_address
from workers.doors.wyoming.tts import SentenceStream

pytestmark = pytest.mark.unit

LIMITS = Limits(header_bytes=1024, data_bytes=512, payload_bytes=4096, idle_seconds=5)


def read(data: bytes, limits: Limits = LIMITS) -> Event | None:
    async def go() -> Event | None:
        reader = asyncio.StreamReader(limit=limits.header_bytes)
        reader.feed_data(data)
        reader.feed_eof()
        return await read_event(reader, limits)

    return asyncio.run(go())


def frame(header: dict[str, object], extra: bytes = b"") -> bytes:
    return json.dumps(header).encode() + b"\n" + extra


def test_a_well_formed_event_with_data_and_payload_is_read() -> None:
    data = json.dumps({"rate": 16000}).encode()
    event = read(
        frame(
            {"type": "audio-chunk", "data": {"width": 2}, "data_length": len(data),
             "payload_length": 4},
            data + b"\x00\x01\x02\x03",
        )
    )  # fmt: skip
    assert event == Event("audio-chunk", {"width": 2, "rate": 16000}, b"\x00\x01\x02\x03")
    assert read(b"") is None  # closed between events


@pytest.mark.parametrize(
    ("data", "outcome"),
    [
        (frame({"type": "audio-chunk", "payload_length": 10**12}), Outcome.AUDIO_TOO_LARGE),
        (frame({"type": "x", "data_length": 10**9}), Outcome.INVALID_INPUT),
        (frame({"type": "x", "payload_length": -1}), Outcome.INVALID_INPUT),
        (frame({"type": "x", "payload_length": "12"}), Outcome.INVALID_INPUT),
        (b"{not json\n", Outcome.INVALID_INPUT),
        (b"[1, 2]\n", Outcome.INVALID_INPUT),
        (frame({"data": {}}), Outcome.INVALID_INPUT),
        (frame({"type": "x", "data": [1]}), Outcome.INVALID_INPUT),
        (frame({"type": "x", "data_length": 3}, b"[1]"), Outcome.INVALID_INPUT),
        (b"\xff\xfe\n", Outcome.INVALID_INPUT),
        (b'{"type": "describe"' + b" " * 2000 + b"}\n", Outcome.INVALID_INPUT),
        (frame({"type": "x", "payload_length": 100}, b"short"), Outcome.INVALID_INPUT),
        (b'{"type": "describe"', Outcome.INVALID_INPUT),
    ],
)
def test_hostile_frames_are_refused_before_they_are_read(data: bytes, outcome: Outcome) -> None:
    with pytest.raises(FrameError) as caught:
        read(data)
    assert caught.value.outcome is outcome


def test_every_outcome_has_advice_and_errors_carry_the_code() -> None:
    assert set(ADVICE) == set(Outcome)
    event = error_event(Failure(Outcome.QUEUE_FULL, "the 'stt' queue is full"))
    assert event.type == "error" and event.data["code"] == "queue_full"
    assert event.data["text"] == "the 'stt' queue is full — try again later"


def test_describe_writes_languages_as_wyoming_voice_servers_do() -> None:
    assert [wyoming_language(t) for t in ("en-us", "en-gb", "zh", "en_US")] == [
        "en_US", "en_GB", "zh", "en_US",
    ]  # fmt: skip
    empty = info_of(Catalog(), False, True)
    assert empty.asr == [] and empty.tts == []  # nothing served: nothing offered


def test_streamed_text_is_cut_at_sentence_ends() -> None:
    stream = SentenceStream(limit=200)
    assert stream.add("The invoice was paid. It arr") == ["The invoice was paid."]
    assert stream.add("ived on Monday! Then") == ["It arrived on Monday!"]
    assert stream.add(" 你好。再见") == ["Then 你好。"]
    assert stream.rest() == "再见"


def test_an_address_off_loopback_is_refused_without_allow_remote() -> None:
    assert Address.parse("tcp://127.0.0.1:10300") == Address(Scheme.TCP, "127.0.0.1", 10300)
    assert Address.parse("unix:///run/wyoming.sock").path == "/run/wyoming.sock"
    assert Address.parse("stdio://").scheme is Scheme.STDIO
    for uri in ("tcp://0.0.0.0:10300", "tcp://[::]:10300", "tcp://192.168.1.5:10300"):
        with pytest.raises(ListenError, match="--allow-remote"):
            check_address(Address.parse(uri), allow_remote=False)
    for bad in ("tcp://127.0.0.1", "http://127.0.0.1:80", "unix://", "tcp://host:port"):
        with pytest.raises(ListenError):
            Address.parse(bad)
