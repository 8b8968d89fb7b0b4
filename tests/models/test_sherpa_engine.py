"""sherpa-onnx as the speech engine, on the prepared folders: the piper voice and Kokoro as
they are (sherpa-onnx reads their files), whisper through a sherpa-layout copy of our export
(`pipelines.engines.sherpa_whisper`, made beside the folder when first needed); through
worker processes with ENGINE=sherpa-onnx, every result naming the engine and the model that
made it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from pipelines.engines.registry import load_transcriber, load_tts, load_vad
from pipelines.engines.sherpa_whisper import copy_folder, export
from pipelines.errors import PermanentError
from pipelines.speech.audio import write_wav
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import transcribe
from tests.support.cluster import ROOT, Cluster
from tests.support.serve import speech_door

pytestmark = pytest.mark.models

VOICE, WHISPER, KOKORO = "piper-en_US-joe-medium", "whisper-tiny.en", "kokoro-v1.0"
SHERPA_WHISPER = "sherpa-onnx-whisper-tiny.en"


@pytest.fixture(scope="module")
def sherpa_whisper(models_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sherpa") / SHERPA_WHISPER
    return export(models_home / "models" / WHISPER, out)


def _words(text: str) -> list[str]:
    return "".join(c for c in text.lower() if c.isalnum() or c.isspace()).split()


def test_the_sherpa_layout_copy_hears_what_our_whisper_hears(
    models_home: Path, sherpa_whisper: Path, tmp_path: Path
) -> None:
    models = models_home / "models"
    voice = load_tts(TtsConfig(models / VOICE, noise_scale=0.0, noise_scale_w=0.0))
    speech = voice.synthesize("The garden needs water every evening. We will review the budget.")
    assert speech.samples is not None
    clip = write_wav(tmp_path / "clip.wav", speech.samples, speech.sample_rate)
    heard = {}
    for folder, engine in ((models / WHISPER, "native"), (sherpa_whisper, "sherpa-onnx")):
        config = SttConfig(folder, vad_model=models / "silero-vad", engine=engine)
        recognizer, detector = load_transcriber(config), load_vad(config)
        expected = "OrtWhisper" if engine == "native" else "SherpaRecognizer"
        assert type(recognizer).__name__ == expected
        heard[engine] = _words(transcribe(clip, recognizer, config, detector).text)
    assert heard["sherpa-onnx"] == heard["native"]
    assert heard["native"][:4] == ["the", "garden", "needs", "water"]


def test_sherpa_onnx_on_a_prepared_whisper_makes_its_copy_once_and_reuses_it(
    cluster: Cluster, models_home: Path, tmp_path: Path
) -> None:
    """No manual step: the first worker makes the sherpa-layout copy beside the folder (in
    this test's own home: the shared prepared folder is copied, never changed) and says so in
    its log; the next worker process reuses it untouched."""
    shared = models_home / "models"
    models = cluster.home / "models"
    models.mkdir(parents=True)
    shutil.copytree(shared / WHISPER, models / WHISPER)
    for name in ("silero-vad", VOICE):
        (models / name).symlink_to(shared / name)
    copy = copy_folder(models / WHISPER)
    assert copy == models / SHERPA_WHISPER and not copy.exists()
    voice = load_tts(TtsConfig(shared / VOICE, noise_scale=0.0, noise_scale_w=0.0))
    said = {
        "first.wav": "Please call the front desk after lunch.",
        "second.wav": "The report is ready.",
    }
    heard, made = [], []
    for clip, text in said.items():
        speech = voice.synthesize(text)
        assert speech.samples is not None
        wav = write_wav(tmp_path / clip, speech.samples, speech.sample_rate)
        worker = cluster.start_worker("stt", concurrency=1, MCP_MEDIA_STT__ENGINE="sherpa-onnx")
        result = cluster.cli_json("transcribe", str(wav), "--wait", "120")
        worker.stop()
        assert result["status"] == "done", (result, worker.text()[-3000:])
        assert (result["engine"], result["model"]) == ("sherpa-onnx", WHISPER)
        heard.append(_words(result["text"]))
        made.append(worker.text().count("made the sherpa-onnx layout copy"))
        if len(heard) == 1:
            assert (copy / f"{WHISPER}-encoder.int8.onnx").is_file()
            stamps = {p.name: p.stat().st_mtime_ns for p in (copy, *copy.iterdir())}
    assert heard == [_words(text) for text in said.values()]
    assert made == [1, 0]
    assert {p.name: p.stat().st_mtime_ns for p in (copy, *copy.iterdir())} == stamps
    assert sorted(p.name for p in models.iterdir()) == sorted(
        [WHISPER, SHERPA_WHISPER, "silero-vad", VOICE]
    )  # no staging folder left behind


def test_kokoro_through_sherpa_onnx_speaks_and_refuses_blends(
    models_home: Path, tmp_path: Path
) -> None:
    models = models_home / "models"
    tts = load_tts(TtsConfig(models / KOKORO, engine="sherpa-onnx", voice="af_bella"))
    assert type(tts.synthesizer).__name__ == "_NoBlends"
    speech = tts.synthesize("She parked the blue car near the bank.")
    assert speech.samples is not None and speech.sample_rate == 24_000
    clip = write_wav(tmp_path / "kokoro.wav", speech.samples, speech.sample_rate)
    config = SttConfig(models / WHISPER)
    text = transcribe(clip, load_transcriber(config), config).text
    assert _words(text) == ["she", "parked", "the", "blue", "car", "near", "the", "bank"]
    with pytest.raises(PermanentError, match="voice blends need the native Kokoro engine"):
        tts.for_voice("af_bella+af_heart").synthesize("Hello there.")


def test_speech_and_transcription_jobs_on_sherpa_onnx_name_their_engine(
    speech_cluster: Cluster, sherpa_whisper: Path, tmp_path: Path
) -> None:
    sherpa = {
        "MCP_MEDIA_TTS__ENGINE": "sherpa-onnx",
        "MCP_MEDIA_STT__ENGINE": "sherpa-onnx",
        "MCP_MEDIA_STT__MODEL_DIR": str(sherpa_whisper),
    }
    speech_cluster.env_vars.update(sherpa)
    speech_cluster.start_worker("tts", concurrency=1)
    speech_cluster.start_worker("stt", concurrency=1)
    spoken = speech_cluster.cli_json(
        "speak", "Please call the front desk after lunch.", "--format", "wav", "--wait", "120"
    )
    assert spoken["status"] == "done", spoken
    assert (spoken["engine"], spoken["model"]) == ("sherpa-onnx", VOICE)
    heard = speech_cluster.cli_json("transcribe", spoken["path"], "--wait", "120")
    assert heard["status"] == "done", heard
    assert _words(heard["text"]) == ["please", "call", "the", "front", "desk", "after", "lunch"]
    assert (heard["engine"], heard["model"]) == ("sherpa-onnx", SHERPA_WHISPER)
    sidecars = {
        path.parent.parent.name: json.loads(path.read_text())["output"]
        for path in (speech_cluster.home / "results").glob("*/*/*.json")
    }
    made = {cap: (out["engine"], out["model"]) for cap, out in sidecars.items()}
    assert made == {
        "audio.synthesize": ("sherpa-onnx", VOICE),
        "audio.transcribe": ("sherpa-onnx", SHERPA_WHISPER),
    }
    structured = anyio.run(_mcp_calls, speech_cluster, spoken["sha256"])
    assert [(r["engine"], r["model"]) for r in structured] == [
        ("sherpa-onnx", VOICE),
        ("sherpa-onnx", SHERPA_WHISPER),
    ]


async def _mcp_calls(cluster: Cluster, sha256: str) -> list[dict[str, Any]]:
    """`speak` and `transcribe_audio` through `mcp-media mcp` and the real SDK client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "mcp"],
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )
    out = []
    async with Client(params, read_timeout_seconds=120) as client:
        for tool, arguments in (
            ("speak", {"text": "Please call the front desk after lunch.", "wait": 60}),
            ("transcribe_audio", {"audio": sha256, "wait": 60}),
        ):
            result = await client.call_tool(tool, arguments, read_timeout_seconds=120)
            assert not result.is_error and result.structured_content is not None, result
            out.append(dict(result.structured_content))
    return out


def test_the_http_door_names_the_engine_and_model_of_each_answer(
    tmp_path: Path, broker: Any, models_home: Path, sherpa_whisper: Path
) -> None:
    sherpa = {
        "MCP_MEDIA_TTS__ENGINE": "sherpa-onnx",
        "MCP_MEDIA_STT__MODEL_DIR": str(sherpa_whisper),  # auto: sherpa-onnx by its layout
    }
    workers = {"stt": 1, "tts": 1}
    with speech_door(tmp_path / "home", broker, models_home, workers, **sherpa) as door:
        _, _, api = door
        speech = api.audio.speech.with_raw_response.create(
            model="tts-1", voice=VOICE, input="The report is ready.", response_format="wav"
        )
        assert speech.headers["x-mcp-media-engine"] == "sherpa-onnx"
        assert speech.headers["x-mcp-media-model"] == VOICE
        text = api.audio.transcriptions.with_raw_response.create(
            model="whisper-1", file=("r.wav", speech.content), response_format="verbose_json"
        )
        assert text.headers["x-mcp-media-engine"] == "sherpa-onnx"
        assert text.headers["x-mcp-media-model"] == SHERPA_WHISPER
        assert _words(text.parse().text) == ["the", "report", "is", "ready"]
