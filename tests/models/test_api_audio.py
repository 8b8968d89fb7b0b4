"""The OpenAI audio API of `mcp-media serve` with the official `openai` client, against a real
serve process, real workers and the real models: every format both ways (the audio decoded
back with PyAV and transcribed), streamed speech and transcription, dedup, concurrency, and
the refusals (auth, oversize, garbage, no worker, queue over high water, wait run out)."""

from __future__ import annotations

import io
import re
import threading
import warnings
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import av
import httpx2
import numpy as np
import openai
import pytest
from openai import OpenAI

from pipelines.media import Capability, MediaKind
from tests.support.audio_samples import corrupt, tone
from tests.support.audio_samples import encode as encode_audio
from tests.support.cluster import Cluster
from tests.support.serve import DETERMINISTIC_VOICE, Served, speech_door, speech_events
from workers.core import keys
from workers.core.stage_configs import store_request, synthesis_request

pytestmark = pytest.mark.models

SENTENCE = "The invoice was paid on Monday."
VOICE = "piper-en_US-joe-medium"
SPEECH_FORMATS: tuple[Literal["mp3", "opus", "aac", "flac", "wav", "pcm"], ...] = (
    "mp3", "opus", "aac", "flac", "wav", "pcm",
)  # fmt: skip
LONG_TEXT = " ".join(
    f"Sentence number {n} of the long reading is here, and it goes on a little."
    for n in range(1, 31)
)


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).split()


def heard(expected: str, got: str) -> float:
    """The share of the expected words the transcript has (lossy codecs may shift one)."""
    want = words(expected)
    have = set(words(got))
    return sum(w in have for w in want) / len(want)


def decode(data: bytes, fmt: str) -> tuple[np.ndarray[Any, Any], int]:
    """Mono float samples and their rate, with PyAV (pcm: OpenAI's 24 kHz s16le)."""
    options: dict[str, Any] = {}
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768, 24_000
    with av.open(io.BytesIO(data), **options) as container:
        stream = container.streams.audio[0]
        frames = [f.to_ndarray().reshape(-1)[: f.samples] for f in container.decode(stream)]
        return np.concatenate(frames).astype(np.float32), stream.sample_rate


def as_wav(samples: np.ndarray[Any, Any], rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def metric(served: Served, name: str, **labels: str) -> float:
    text = httpx2.get(
        f"{served.url}/metrics", headers={"Authorization": f"Bearer {served.key}"}, timeout=30
    ).text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture(scope="module")
def speech_api(
    tmp_path_factory: pytest.TempPathFactory, broker: Any, models_home: Path
) -> Iterator[tuple[Cluster, Served, OpenAI]]:
    """One cluster for the module: an stt worker, a tts worker and serve (deterministic voice)."""
    home = tmp_path_factory.mktemp("api") / "home"
    workers = {"stt": 2, "tts": 1}
    with speech_door(home, broker, models_home, workers, **DETERMINISTIC_VOICE) as door:
        yield door


def translate(api: OpenAI, data: bytes) -> object:
    with warnings.catch_warnings():  # the client marks translations deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        return api.audio.translations.create(model="whisper-1", file=("a.wav", data))


def transcribe(api: OpenAI, data: bytes, name: str, **kwargs: Any) -> Any:
    return api.audio.transcriptions.create(model="whisper-1", file=(name, data), **kwargs)


def test_every_speech_format_decodes_and_transcribes_back(
    speech_api: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, _served, api = speech_api
    for fmt in SPEECH_FORMATS:
        audio = api.audio.speech.create(
            model="tts-1", voice="alloy", input=SENTENCE, response_format=fmt
        ).content
        samples, rate = decode(audio, fmt)
        assert len(samples) / rate > 1.0, fmt  # a sentence of speech, not a click
        upload = as_wav(samples, rate) if fmt == "pcm" else audio
        name = "speech.wav" if fmt == "pcm" else f"speech.{fmt}"
        text = transcribe(api, upload, name).text
        assert heard(SENTENCE, text) >= 0.8, (fmt, text)


def test_every_transcription_format_and_dedup(speech_api: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, api = speech_api
    wav = api.audio.speech.create(
        model="tts-1", voice="echo", input=SENTENCE, response_format="wav"
    ).content
    hits = metric(served, "mcp_media_api_dedup_hits_total", capability="audio.transcribe")
    assert heard(SENTENCE, transcribe(api, wav, "a.wav").text) >= 0.8
    text = transcribe(api, wav, "a.wav", response_format="text")
    assert isinstance(text, str) and heard(SENTENCE, text) >= 0.8
    srt = transcribe(api, wav, "a.wav", response_format="srt")
    assert srt.startswith("1\n00:00:00,000 --> ")
    vtt = transcribe(api, wav, "a.wav", response_format="vtt")
    assert vtt.startswith("WEBVTT\n") and " --> " in vtt
    verbose = transcribe(
        api, wav, "a.wav", response_format="verbose_json", timestamp_granularities=["segment"]
    )
    assert verbose.language == "english" and verbose.duration > 1.0
    assert verbose.segments and verbose.segments[0].start == 0.0
    assert verbose.segments[-1].end > verbose.segments[0].start
    # the same audio five times: one job, four answers from the stored result
    after = metric(served, "mcp_media_api_dedup_hits_total", capability="audio.transcribe")
    assert after - hits == 4
    prompt_and_temperature = transcribe(api, wav, "a.wav", prompt="Invoices.", temperature=0.2)
    assert prompt_and_temperature.text == transcribe(api, wav, "a.wav").text


def test_streamed_transcription_sends_deltas_then_done(
    speech_api: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, _served, api = speech_api
    wav = api.audio.speech.create(
        model="tts-1", voice="nova", input="We will review the budget next week.",
        response_format="wav",
    ).content  # fmt: skip
    events = list(
        api.audio.transcriptions.create(model="whisper-1", file=("b.wav", wav), stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.done") == 1
    assert "transcript.text.delta" in kinds
    deltas = "".join(e.delta for e in events if e.type == "transcript.text.delta")
    done = events[-1]
    assert done.type == "transcript.text.done"
    assert deltas.strip() == done.text
    assert heard("We will review the budget next week.", done.text) >= 0.8


def test_long_transcription_streams_segments_before_the_job_ends(
    speech_api: tuple[Cluster, Served, OpenAI],
) -> None:
    cluster, _served, api = speech_api
    text = " ".join(LONG_TEXT.split(". ")[:14])  # ~45 s of speech: several VAD segments
    wav = api.audio.speech.create(
        model="tts-1", voice="alloy", input=text, response_format="wav"
    ).content
    client = cluster.client()
    stored = client.settings.media_cache().store_bytes(wav, MediaKind.AUDIO)
    key = client.key(Capability.AUDIO_TRANSCRIBE, stored.sha256)
    stream = api.audio.transcriptions.create(model="whisper-1", file=("long.wav", wav), stream=True)
    events = iter(stream)
    first = next(events)
    assert first.type == "transcript.text.delta"
    assert client.state.results.get(key) is None  # the first words came before the job's result
    rest = list(events)
    client.close()
    deltas = [first, *(e for e in rest if e.type == "transcript.text.delta")]
    done = rest[-1]
    assert done.type == "transcript.text.done" and len(deltas) > 1
    assert "".join(e.delta for e in deltas).strip() == done.text
    assert heard(text, done.text) >= 0.7


def synthesis_jobs_observed(served: Served) -> float:
    """The count of the API's job histogram for speech, read from /metrics."""
    auth = {"Authorization": f"Bearer {served.key}"}
    text = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=30).text
    prefix = 'mcp_media_api_job_seconds_count{capability="audio.synthesize"}'
    found = [line.split()[-1] for line in text.splitlines() if line.startswith(prefix)]
    return float(found[0]) if found else 0.0


def test_speech_streams_before_the_synthesis_ends(
    speech_api: tuple[Cluster, Served, OpenAI],
) -> None:
    cluster, served, api = speech_api
    observed = synthesis_jobs_observed(served)
    client = cluster.client()
    settings = client.settings
    # the key the server gives this request: the same request document, hashed the same way
    params = synthesis_request(LONG_TEXT, settings, fmt="mp3", speed=1.0, voice=VOICE)
    key = client.key(Capability.AUDIO_SYNTHESIZE, store_request(settings, params).sha256)
    with api.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=LONG_TEXT, response_format="mp3"
    ) as response:
        chunks = response.iter_bytes(4096)
        first = next(chunks)
        # The first bytes are here and the job has not stored its result yet: the audio of
        # the first sentences left before the last ones were synthesised.
        assert client.state.results.get(key) is None
        assert client.redis.exists(keys.chunks(key))
        rest = b"".join(chunks)
    samples, rate = decode(first + rest, "mp3")
    assert len(samples) / rate > 30  # thirty sentences
    # A streamed job is counted like any other once the stream ends.
    assert synthesis_jobs_observed(served) == observed + 1
    # and the stream is the stored file, so the second request is a cache hit with the same audio
    again = api.audio.speech.create(
        model="tts-1", voice="alloy", input=LONG_TEXT, response_format="mp3"
    ).content
    assert abs(len(again) - len(first + rest)) < 2048  # the file differs only by its patched header
    client.close()


def test_speech_as_server_sent_events(speech_api: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, _api = speech_api
    body = {"model": "tts-1", "voice": "alloy", "input": LONG_TEXT[:400], "stream_format": "sse",
            "response_format": "pcm"}  # fmt: skip
    events = speech_events(served, body)
    assert events[-1]["type"] == "speech.audio.done"
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) > 1  # one per sentence or so, not one blob
    import base64

    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(pcm) / 2 / 24_000 > 5


def test_models_voices_readiness_and_metrics(speech_api: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, served, api = speech_api
    ids = {m.id for m in api.models.list()}
    assert {"whisper-1", "whisper-tiny.en", "tts-1", "piper-en_US-joe-medium"} <= ids
    auth = {"Authorization": f"Bearer {served.key}"}
    voices = httpx2.get(f"{served.url}/v1/audio/voices", headers=auth, timeout=30).json()
    assert voices["voices"][0]["id"] == "piper-en_US-joe-medium"
    assert voices["aliases"]["alloy"] == "piper-en_US-joe-medium"
    ready = httpx2.get(f"{served.url}/readyz", timeout=30)
    assert (ready.status_code == 200 and ready.json()["workers"] == {"stt": 2, "tts": 1}) or (
        ready.json()["status"] == "ready"
    )
    text = httpx2.get(f"{served.url}/metrics", headers=auth, timeout=30).text
    for name in (
        'mcp_media_queue_depth{queue="stt"}',
        'mcp_media_workers{queue="tts"}',
        'mcp_media_jobs{capability="audio.transcribe",status="done"}',
        "mcp_media_api_job_seconds_bucket",
        "mcp_media_api_provider_calls_total",
    ):
        assert name in text, name


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(
    speech_api: tuple[Cluster, Served, OpenAI],
) -> None:
    _cluster, served, api = speech_api
    wav = encode_audio(tone(1.0), 16_000, "wav")
    refusals: dict[str, Callable[[], object]] = {
        "translation": lambda: translate(api, wav),
        "language": lambda: transcribe(api, wav, "a.wav", language="fr"),
        "format": lambda: transcribe(api, wav, "a.wav", response_format="docx"),
        "model": lambda: api.audio.transcriptions.create(model="large-v9", file=("a.wav", wav)),
        "voice": lambda: api.audio.speech.create(model="tts-1", voice="nobody", input="Hi."),
        "speech format": lambda: api.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input="Hi.",
            response_format="ogg",  # type: ignore[arg-type]
        ),
        "empty input": lambda: api.audio.speech.create(model="tts-1", voice="alloy", input=" "),
    }
    for name, call in refusals.items():
        with pytest.raises(openai.BadRequestError) as refused:
            call()
        assert refused.value.status_code == 400, name
    with pytest.raises(openai.BadRequestError, match="English-only"):
        refusals["translation"]()
    garbage = b"this is not audio at all, just some words " * 20
    with pytest.raises(openai.APIStatusError) as caught:
        transcribe(api, garbage, "g.mp3")
    assert caught.value.status_code == 415
    broken = corrupt(encode_audio(tone(2.0), 16_000, "flac"), keep_header=64)
    with pytest.raises(openai.APIStatusError) as caught:
        transcribe(api, broken, "b.flac")
    assert caught.value.status_code == 415 and "unreadable audio" in caught.value.message
    wrong = served.openai(key="x" * 24)
    with pytest.raises(openai.AuthenticationError):
        wrong.audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
    speech = api.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE)
    assert speech.content[:3] in (b"ID3", b"\xff\xfb", b"\xff\xf3")


def test_eight_concurrent_clients(speech_api: tuple[Cluster, Served, OpenAI]) -> None:
    _cluster, _served, api = speech_api
    lines = [f"Client {n} asks for the report of week {n + 10}." for n in range(8)]
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            audio = api.audio.speech.create(
                model="tts-1", voice="alloy", input=lines[n], response_format="flac"
            ).content
            results[n] = transcribe(api, audio, f"c{n}.flac").text
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for n, text in results.items():
        assert f"week {n + 10}" in text.lower() or heard(lines[n], text) >= 0.7, (n, text)
    assert len(results) == 8
