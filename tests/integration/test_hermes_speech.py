"""hermes-agent's own OpenAI speech providers (its voice-message transcription and its
text_to_speech tool) pointed at `mcp-media serve`, with real workers and models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.support.hermes import speech_call
from tests.support.serve import DETERMINISTIC_VOICE, Served, speech_door
from workers.broker.embedded import Broker

pytestmark = pytest.mark.models

SENTENCE = "The invoice was paid on Monday."


@pytest.fixture(scope="module")
def door(
    tmp_path_factory: pytest.TempPathFactory, broker: Broker, models_home: Path
) -> Iterator[tuple[Served, OpenAI]]:
    home = tmp_path_factory.mktemp("hermes-speech") / "home"
    workers = {"stt": 1, "tts": 1}
    with speech_door(home, broker, models_home, workers, **DETERMINISTIC_VOICE) as made:
        _, served, api = made
        yield served, api


def test_hermes_text_to_speech_through_serve(tmp_path: Path, door: tuple[Served, OpenAI]) -> None:
    served, api = door
    out = tmp_path / "voice.ogg"
    said = speech_call(
        tmp_path / "hermes", f"{served.url}/v1", served.key, "tts", SENTENCE, str(out)
    )
    assert said.get("success") is True, said
    data = out.read_bytes()
    assert data.startswith(b"OggS") and b"OpusHead" in data[:200]
    heard = api.audio.transcriptions.create(model="whisper-1", file=("voice.ogg", data))
    assert "paid on monday" in heard.text.lower(), heard.text


def test_hermes_transcription_through_serve(tmp_path: Path, door: tuple[Served, OpenAI]) -> None:
    served, api = door
    spoken = tmp_path / "spoken.wav"
    with api.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=SENTENCE, response_format="wav"
    ) as response:
        spoken.write_bytes(response.read())
    heard = speech_call(tmp_path / "hermes", f"{served.url}/v1", served.key, "stt", str(spoken))
    assert heard.get("success") is True, heard
    assert "paid on monday" in str(heard.get("transcript")).lower(), heard
