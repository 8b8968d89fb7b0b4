"""The Wyoming door with the `wyoming` package's own client, as Home Assistant uses it,
against a real `mcp-media wyoming` process, real workers and the real models: describe,
synthesize (whole and streamed), transcription of that speech at several rates, widths and
channel counts, the language honoured or refused."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info, SelectProgram
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from tests.support.cluster import Cluster
from tests.support.fake_openai import FakeOpenAI
from tests.support.serve import DETERMINISTIC_VOICE
from tests.support.wyoming_door import WyomingDoor, run, wyoming

pytestmark = pytest.mark.models

SENTENCE = "The invoice was paid on Monday."
VOICE = "piper-en_US-joe-medium"


@pytest.fixture(scope="module")
def door(
    tmp_path_factory: pytest.TempPathFactory, broker: Any, models_home: Path
) -> Iterator[WyomingDoor]:
    """A cluster with one stt and one tts worker, and the Wyoming door in front of it."""
    client = redis.Redis.from_url(broker.url)
    client.flushall()
    client.close()
    with FakeOpenAI() as fake:
        cluster = Cluster(tmp_path_factory.mktemp("wyoming") / "home", broker, fake)
        cluster.home.mkdir(parents=True)
        (cluster.home / "models").symlink_to(models_home / "models")
        cluster.env_vars.update(DETERMINISTIC_VOICE)
        try:
            cluster.start_worker("stt", concurrency=1)
            cluster.start_worker("tts", concurrency=1)
            with wyoming(cluster) as served:
                yield served
        finally:
            cluster.stop()


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).split()


def heard(expected: str, got: str) -> float:
    have = set(words(got))
    want = words(expected)
    return sum(w in have for w in want) / len(want)


def describe(door: WyomingDoor) -> Info:
    events = run(door.client(), [Describe().event()], ["info"])
    assert events[-1].type == "info", events
    return Info.from_event(events[-1])


def speak(door: WyomingDoor, events: list[Event], until: str = "audio-stop") -> list[Event]:
    got = run(door.client(), events, [until])
    assert got and got[-1].type == until, got[-1:]
    return got


def audio_of(events: list[Event]) -> bytes:
    return b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk")


def transcribe(
    door: WyomingDoor, pcm: bytes, rate: int, width: int, channels: int, language: str | None
) -> Event:
    """One utterance as Home Assistant sends it: transcribe, audio-start, chunks of about
    100 ms, audio-stop; the answer (a transcript or an error)."""
    step = rate * width * channels // 10
    events = [
        Transcribe(language=language).event(),
        AudioStart(rate, width, channels).event(),
        *(
            AudioChunk(rate, width, channels, pcm[at : at + step]).event()
            for at in range(0, len(pcm), step)
        ),
        AudioStop().event(),
    ]
    return run(door.client(), events, ["transcript"])[-1]


def test_describe_lists_the_served_model_and_voices(door: WyomingDoor) -> None:
    info = describe(door)
    (asr,) = info.asr
    assert asr.installed and not asr.supports_transcript_streaming
    (model,) = asr.models
    assert model.name == "whisper-tiny.en" and model.installed and model.languages == ["en"]
    (tts,) = info.tts
    assert tts.installed and tts.supports_synthesize_streaming
    voices = {voice.name: voice for voice in tts.voices}
    assert voices[VOICE].installed and voices[VOICE].languages == ["en_US"]


def test_speech_synthesized_then_transcribed_in_any_format(door: WyomingDoor) -> None:
    request = Synthesize(text=SENTENCE, voice=SynthesizeVoice(name=VOICE)).event()
    events = speak(door, [SelectProgram("mcp-media").event(), request])  # as newer clients do
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
    pcm = audio_of(events)
    assert len(pcm) / (2 * 24_000) > 1.0  # a sentence of speech, not a click
    by_language = speak(door, [Synthesize(SENTENCE, SynthesizeVoice(language="en_US")).event()])
    assert audio_of(by_language) == pcm  # the same voice (the only one), the stored result

    samples = np.frombuffer(pcm, "<i2").astype(np.float64)
    at_16k = np.interp(np.arange(0, len(samples), 1.5), np.arange(len(samples)), samples)
    forms = {
        "24 kHz mono 16-bit": (pcm, 24_000, 2, 1),
        "16 kHz mono 16-bit": (at_16k.astype("<i2").tobytes(), 16_000, 2, 1),
        "24 kHz stereo 16-bit": (np.repeat(samples, 2).astype("<i2").tobytes(), 24_000, 2, 2),
        "24 kHz mono 32-bit": ((samples * 65536).astype("<i4").tobytes(), 24_000, 4, 1),
    }
    for name, (data, rate, width, channels) in forms.items():
        answer = transcribe(door, data, rate, width, channels, "en")
        assert answer.type == "transcript", (name, answer)
        said = Transcript.from_event(answer)
        assert heard(SENTENCE, said.text) >= 0.8, (name, said.text)
        assert said.language == "en"


def test_the_language_is_honoured_or_refused(door: WyomingDoor) -> None:
    pcm = audio_of(speak(door, [Synthesize(SENTENCE, SynthesizeVoice(name=VOICE)).event()]))
    dialect = transcribe(door, pcm, 24_000, 2, 1, "en_US")
    assert heard(SENTENCE, Transcript.from_event(dialect).text) >= 0.8
    refused = transcribe(door, pcm, 24_000, 2, 1, "zh")
    assert refused.type == "error"
    error = Error.from_event(refused)
    assert error.code == "unsupported" and "English-only" in error.text
    unknown = speak(
        door, [Synthesize("Hello.", SynthesizeVoice(name="nobody_here")).event()], "error"
    )
    assert Error.from_event(unknown[-1]).code == "unsupported"


def test_streamed_synthesis_is_voiced_sentence_by_sentence_once(door: WyomingDoor) -> None:
    whole = "The invoice was paid. It arrived on Monday. That was all."
    events = [
        SynthesizeStart(voice=SynthesizeVoice(name=VOICE)).event(),
        SynthesizeChunk("The invoice was paid. It arr").event(),
        SynthesizeChunk("ived on Monday. That").event(),
        SynthesizeChunk(" was all.").event(),
        Synthesize(whole, SynthesizeVoice(name=VOICE)).event(),  # for older servers: not again
        SynthesizeStop().event(),
    ]
    got = speak(door, events, "synthesize-stopped")
    kinds = [event.type for event in got if event.type != "audio-chunk"]
    assert kinds == ["audio-start", "audio-stop"] * 3 + ["synthesize-stopped"]
    pcm = audio_of(got)
    samples = np.frombuffer(pcm, "<i2").astype(np.float64)
    at_16k = np.interp(np.arange(0, len(samples), 1.5), np.arange(len(samples)), samples)
    said = transcribe(door, at_16k.astype("<i2").tobytes(), 16_000, 2, 1, None)
    assert heard(whole, Transcript.from_event(said).text) >= 0.8


def test_describe_and_transcript_times(
    door: WyomingDoor, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not asserted (the machine is shared): printed for the report."""
    pcm = audio_of(speak(door, [Synthesize("Turn on the kitchen light.").event()]))

    async def first_audio(text: str) -> float:
        async with door.client() as client:
            started = time.perf_counter()
            await client.write_event(Synthesize(text, SynthesizeVoice(name=VOICE)).event())
            while (event := await client.read_event()) is not None:
                if event.type == "audio-chunk":
                    return time.perf_counter() - started
        raise AssertionError("no audio")

    async def timed() -> tuple[float, float, Event | None]:
        async with door.client() as client:
            started = time.perf_counter()
            await client.write_event(Describe().event())
            info = await client.read_event()
            described = time.perf_counter() - started
            assert info is not None and info.type == "info"
        async with door.client() as client:
            await client.write_event(Transcribe(language="en").event())
            await client.write_event(AudioStart(24_000, 2, 1).event())
            for at in range(0, len(pcm), 4800):
                await client.write_event(AudioChunk(24_000, 2, 1, pcm[at : at + 4800]).event())
            started = time.perf_counter()
            await client.write_event(AudioStop().event())
            said = await client.read_event()
            return described, time.perf_counter() - started, said

    described, transcribed, said = asyncio.run(timed())
    reply = "The kitchen light is on. The living room stays dark, as you asked this morning."
    spoken = asyncio.run(first_audio(reply))
    assert said is not None and said.type == "transcript"
    assert heard("Turn on the kitchen light.", Transcript.from_event(said).text) >= 0.8
    with capsys.disabled():
        print(
            f"\n[wyoming] describe->info {described * 1000:.1f} ms; audio-stop->transcript "
            f"{transcribed * 1000:.0f} ms for a {len(pcm) / 48_000:.2f} s clip; synthesize->"
            f"first audio {spoken * 1000:.0f} ms (two sentences, a new text)"
        )
