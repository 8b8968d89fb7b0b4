"""Voices by name through a real serve, a real tts worker and the official `openai` client on
the real Kokoro v1.0 and piper voices: each voice answers for itself (never from another's
cache), every prepared voice by its own name, the lists Open WebUI reads without a key,
Kokoro blends, and Kokoro's first audio as a short piece of its own."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import openai
import pytest
from openai import OpenAI

from pipelines.engines.registry import load_transcriber, load_tts
from pipelines.speech.audio import write_wav
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from pipelines.speech.tts import VoiceError
from tests.support.serve import DETERMINISTIC_VOICE, Served, speech_door, speech_events
from workers.provisioning.models import ModelInfo

pytestmark = pytest.mark.models

SENTENCE = "The invoice was paid on Monday."
CHINESE = "明天下午三点我们开会。"


@pytest.fixture(scope="module")
def voices_api(
    tmp_path_factory: pytest.TempPathFactory,
    broker: Any,
    models_home: Path,
    quality_models: list[ModelInfo],
) -> Iterator[tuple[Served, OpenAI]]:
    """One tts worker (piper by default, Kokoro loaded when a request names it) and serve."""
    home = tmp_path_factory.mktemp("voices") / "home"
    with speech_door(home, broker, models_home, {"tts": 1}, **DETERMINISTIC_VOICE) as door:
        _, served, api = door
        yield served, api


def speak(api: OpenAI, voice: str, model: str = "tts-1", text: str = SENTENCE) -> bytes:
    return api.audio.speech.create(
        model=model, voice=voice, input=text, response_format="pcm"
    ).content  # raw samples: a streamed WAV's header differs from a stored one's


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_two_kokoro_voices_give_two_answers(voices_api: tuple[Served, OpenAI]) -> None:
    """The table's case: model kokoro-v1.0 with af_bella, then bf_emma, answered the second
    from the first's cache (the same bytes)."""
    _served, api = voices_api
    bella = speak(api, "af_bella", model="kokoro-v1.0")
    emma = speak(api, "bf_emma", model="kokoro-v1.0")
    assert len(bella) > 48_000 and len(emma) > 48_000  # a second of 24 kHz s16 at least
    assert digest(bella) != digest(emma)
    # tts-1 with a voice's own name is the same request: the same stored answer
    assert digest(speak(api, "af_bella")) == digest(bella)
    assert digest(speak(api, "af_bella", model="kokoro-v1.0")) == digest(bella)


def test_every_prepared_voice_answers_by_its_own_name(voices_api: tuple[Served, OpenAI]) -> None:
    _served, api = voices_api
    chinese = speak(api, "zf_xiaobei", text=CHINESE)
    heart = speak(api, "af_heart")
    piper = speak(api, "piper-en_US-joe-medium")
    assert len({digest(chinese), digest(heart), digest(piper)}) == 3
    assert len(chinese) > 48_000
    with pytest.raises(openai.BadRequestError) as refused:
        speak(api, "af_nobody")
    assert refused.value.code == "unknown_voice"
    assert "GET /v1/audio/voices" in refused.value.message
    with pytest.raises(openai.BadRequestError) as refused:
        speak(api, "af_bella", model="piper-en_US-joe-medium")
    assert "belongs to model 'kokoro-v1.0'" in refused.value.message


def test_voices_and_models_read_as_open_webui_reads_them_without_a_key(
    voices_api: tuple[Served, OpenAI],
) -> None:
    served, _api = voices_api
    data = httpx2.get(f"{served.url}/v1/audio/voices", timeout=30).json()
    voices = {v["id"]: v["name"] for v in data.get("voices", [])}  # Open WebUI's own parse
    assert {"piper-en_US-joe-medium", "af_heart", "af_bella", "bf_emma", "zf_xiaobei"} <= set(
        voices
    )
    by_id = {v["id"]: v for v in data["voices"]}
    assert by_id["zf_xiaobei"]["language"] == "zh"
    assert by_id["zf_xiaobei"]["model"] == "kokoro-v1.0"
    assert by_id["piper-en_US-joe-medium"]["language"] == "en-us"
    assert data["voices"][0]["id"] == "piper-en_US-joe-medium"  # the configured voice first
    assert data["aliases"]["alloy"] == "piper-en_US-joe-medium"
    models = httpx2.get(f"{served.url}/v1/audio/models", timeout=30).json()
    ids = [m["id"] for m in models.get("models", [])]  # Open WebUI reads `models`
    assert {"tts-1", "kokoro-v1.0", "piper-en_US-joe-medium"} <= set(ids)
    assert [m["id"] for m in models["data"]] == ids
    assert all(m["object"] == "model" and "created" in m for m in models["data"])


def test_a_blend_speaks_and_differs_from_its_voices(voices_api: tuple[Served, OpenAI]) -> None:
    _served, api = voices_api
    bella = speak(api, "af_bella")
    heart = speak(api, "af_heart")
    equal = speak(api, "af_bella+af_heart", model="kokoro-v1.0")
    weighted = speak(api, "af_bella(2)+af_heart(1)")
    assert len({digest(bella), digest(heart), digest(equal), digest(weighted)}) == 4
    with pytest.raises(openai.BadRequestError) as refused:
        speak(api, "af_bella+zf_xiaobei")
    assert refused.value.code == "unknown_voice" and "mixes languages" in refused.value.message


def test_a_blend_is_the_normalised_weighted_average(models_home: Path, quality_models: Any) -> None:
    """On the engine: weights (2, 1) and (4, 2) are one blend; a blend is neither voice."""
    kokoro = load_tts(TtsConfig(models_home / "models" / "kokoro-v1.0"))

    def said(voice: str) -> np.ndarray[Any, Any]:
        samples = kokoro.for_voice(voice).synthesize("Good morning.").samples
        assert samples is not None
        return samples

    blend = said("af_bella(2)+af_heart(1)")
    assert np.array_equal(blend, said("af_bella(4)+af_heart(2)"))
    for alone in (said("af_bella"), said("af_heart")):
        assert len(alone) != len(blend) or not np.allclose(alone, blend, atol=1e-3)
    with pytest.raises(VoiceError, match="mixes languages"):
        kokoro.for_voice("af_heart+zm_yunxi")


REPORT = (
    "The quarterly report shows that sales grew by twelve percent in the north. "
    "Thank you all for the hard work."
)


def test_a_streamed_kokoro_reply_opens_with_a_short_piece_of_its_own(
    voices_api: tuple[Served, OpenAI],
) -> None:
    """The first audio waits for a few words, not the whole first sentence: the first
    streamed chunk is far shorter than that sentence's four seconds of speech."""
    served, _api = voices_api
    body = {"model": "kokoro-v1.0", "voice": "af_heart", "input": REPORT,
            "stream_format": "sse", "response_format": "pcm"}  # fmt: skip
    events = speech_events(served, body)
    deltas = [base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"]
    seconds = [len(d) / 2 / 24_000 for d in deltas]  # 24 kHz s16le
    assert len(deltas) >= 3, seconds  # the opening words, the rest of the sentence, the next
    assert 0.5 < seconds[0] < 2.5, seconds
    assert sum(seconds) > 6.0, seconds


def test_kokoro_speaks_every_word_when_the_first_sentence_is_cut(
    models_home: Path, quality_models: Any, tmp_path: Path
) -> None:
    """On the engine: the first piece is the opening words, the pieces are the text, and
    whisper hears the words on both sides of the cut."""
    kokoro = load_tts(TtsConfig(models_home / "models" / "kokoro-v1.0")).for_voice("af_heart")
    parts = list(kokoro.stream(REPORT))
    assert [p.text for p in parts] == [
        "The quarterly report shows",
        "that sales grew by twelve percent in the north.",
        "Thank you all for the hard work.",
    ]
    assert [p.index for p in parts] == [0, 0, 1]
    samples = np.concatenate([p.samples for p in parts])
    whole = kokoro.synthesize(REPORT)
    assert whole.samples is not None and np.array_equal(whole.samples, samples)
    assert whole.sentences == 2
    stt = SttConfig(models_home / "models" / "whisper-tiny.en")
    wav = write_wav(tmp_path / "report.wav", samples, kokoro.sample_rate)
    text = transcribe(wav, load_transcriber(stt), stt).text.lower()
    assert "report shows that sales" in text, text
    assert "thank you all for the hard work" in text, text
