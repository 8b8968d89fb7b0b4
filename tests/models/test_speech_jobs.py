"""Speech workers on a real cluster with the real models: transcription and synthesis jobs,
per-node concurrency, bad input that leaves the worker serving, readiness on bad models,
and one synthesis per identical request."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.engines.registry import load_tts
from pipelines.media import Capability, JobRequest, MediaKind
from pipelines.results import Status
from pipelines.speech.audio import write_wav
from pipelines.speech.config import TtsConfig
from pipelines.speech.tts import TextToSpeech
from tests.support.audio_samples import silent_wav
from tests.support.cluster import Cluster, write_result
from tests.support.factories import b64

pytestmark = pytest.mark.models

VOICE = "piper-en_US-joe-medium"
SENTENCES = [
    "The invoice was paid on Monday.",
    "Please call the front desk after lunch.",
    "Our train leaves from platform nine.",
    "The garden needs water every evening.",
    "She parked the blue car near the bank.",
    "We will review the budget next week.",
]


@pytest.fixture(scope="module")
def voice(models_home: Path) -> TextToSpeech:
    config = TtsConfig(models_home / "models" / VOICE, noise_scale=0.0, noise_scale_w=0.0)
    return load_tts(config)


def clip(voice: TextToSpeech, text: str, path: Path) -> Path:
    speech = voice.synthesize(text)
    assert speech.samples is not None
    return write_wav(path, speech.samples, speech.sample_rate)


def test_transcription_job_through_a_worker(
    speech_cluster: Cluster, voice: TextToSpeech, tmp_path: Path
) -> None:
    speech_cluster.start_worker("stt", concurrency=1)
    audio = clip(voice, SENTENCES[0], tmp_path / "a.wav")
    out = speech_cluster.cli_json("transcribe", str(audio), "--wait", "120")
    assert out["status"] == "done"
    assert out["text"].lower().rstrip(".") == SENTENCES[0].lower().rstrip(".")
    assert out["segments"][0]["start"] == 0.0
    assert out["duration_s"] == pytest.approx(out["segments"][-1]["end"], abs=0.05)
    srt = speech_cluster.cli("transcribe", str(audio), "--wait", "60", "--format", "srt")
    assert srt.returncode == 0 and srt.stdout.startswith("1\n00:00:00,000 --> ")


def test_silence_through_a_worker_says_no_speech_was_detected(
    speech_cluster: Cluster, tmp_path: Path
) -> None:
    speech_cluster.start_worker("stt", concurrency=1)
    audio = tmp_path / "silence.wav"
    audio.write_bytes(silent_wav(3.0))
    out = speech_cluster.cli_json("transcribe", str(audio), "--wait", "120")
    assert out["status"] == "done"
    assert (out["text"], out["note"], out["segments"]) == ("", "no speech detected", [])
    plain = speech_cluster.cli("transcribe", str(audio), "--wait", "60")
    assert (plain.returncode, plain.stdout) == (0, "[no speech detected in the audio]\n")
    block = {"type": "audio", "data": b64(audio.read_bytes()), "mimeType": "audio/wav"}
    result = write_result(tmp_path / "r.json", [{"type": "text", "text": "voice note:"}, block])
    agent = speech_cluster.cli_json("ingest", str(result), "--wait", "60")
    lines = agent["text"].split("\n")
    assert lines[0] == "voice note:" and lines[1].startswith("MEDIA:")
    assert lines[2:] == ["[no speech detected in the audio]"]


def test_six_jobs_on_concurrency_two_never_overlap_more_than_two(
    speech_cluster: Cluster, voice: TextToSpeech, tmp_path: Path
) -> None:
    speech_cluster.start_worker("stt", concurrency=2)
    cache = speech_cluster.settings().media_cache()
    jobs = []
    for i, text in enumerate(SENTENCES):
        stored = cache.store_file(clip(voice, text, tmp_path / f"{i}.wav"), MediaKind.AUDIO)
        jobs.append(JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path))
    client = speech_cluster.client()
    try:
        handles = client.wait(client.submit(jobs), timeout=180)
    finally:
        client.close()
    assert [h.status for h in handles] == [Status.DONE] * 6
    spans = []
    for h in handles:
        assert h.envelope is not None and h.envelope.started_at is not None
        spans.append((h.envelope.started_at, h.envelope.started_at + h.envelope.elapsed_ms / 1000))
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == 2  # both processes were used, and never a third job at once
    workers = {h.envelope.worker for h in handles if h.envelope is not None}
    assert len(workers) == 1  # one node, two processes


def test_corrupt_audio_fails_clearly_and_the_worker_keeps_serving(
    speech_cluster: Cluster, voice: TextToSpeech, tmp_path: Path
) -> None:
    speech_cluster.start_worker("stt", concurrency=1)
    good = clip(voice, SENTENCES[2], tmp_path / "good.wav")
    broken = tmp_path / "broken.wav"
    # A RIFF/WAVE signature (so the cache takes it as audio) over bytes that are no WAV.
    broken.write_bytes(b"RIFF\x00\x10\x00\x00WAVE" + b"junk" * 1000)
    bad = speech_cluster.cli_json_exit(1, "transcribe", str(broken), "--wait", "60")
    assert bad["status"] == "failed" and bad["outcome"] == "unreadable_audio", bad
    assert bad["reason"].startswith("AudioDecodeError: "), bad["reason"]
    fine = speech_cluster.cli_json("transcribe", str(good), "--wait", "60")
    assert fine["status"] == "done" and "train leaves from platform" in fine["text"].lower()


def test_speak_through_a_worker_once_per_identical_request(speech_cluster: Cluster) -> None:
    speech_cluster.start_worker("tts", concurrency=1)
    first = speech_cluster.cli_json("speak", "The report is ready.", "--wait", "60")
    second = speech_cluster.cli_json("speak", "The report is ready.", "--wait", "60")
    assert first["status"] == second["status"] == "done"
    assert first["path"] == second["path"] and first["id"] == second["id"]
    assert first["media_tag"] == f"[[audio_as_voice]]\nMEDIA:{first['path']}"
    assert Path(first["path"]).read_bytes()[:4] == b"OggS"
    assert first["duration_s"] > 0.5
    counts = speech_cluster.cli_json("status")["results"]["audio.synthesize"]
    assert counts == {"done": 1}
    wav = speech_cluster.cli_json(
        "speak", "The report is ready.", "--format", "wav", "--wait", "60"
    )
    assert wav["path"] != first["path"] and wav["path"].endswith(".wav")


def test_speak_stream_is_a_cached_job_on_the_workers(
    speech_cluster: Cluster, tmp_path: Path
) -> None:
    """`speak --stream` loads no model in the command: the worker streams the pages of a job
    that is deduplicated and stored like any other, and the same request again is the file."""
    speech_cluster.start_worker("tts", concurrency=1)
    text = "The stream starts now. It ends after the third sentence. That is all."
    out = tmp_path / "first.ogg"
    first = speech_cluster.cli_json("speak", text, "--stream", "--out", str(out))
    assert first["status"] == "done" and first["duration_s"] > 1.0
    streamed = out.read_bytes()
    assert streamed[:4] == b"OggS"
    counts = speech_cluster.cli_json("status")["results"]["audio.synthesize"]
    assert counts.get("done") == 1  # the stream was a job, stored once
    again = tmp_path / "again.ogg"
    second = speech_cluster.cli_json("speak", text, "--stream", "--out", str(again))
    assert second["status"] == "done" and second["id"] == first["id"]  # one job, answered
    assert speech_cluster.cli_json("result", first["id"])["status"] == "done"
    assert speech_cluster.cli_json("status")["results"]["audio.synthesize"] == counts
    stored = speech_cluster.cli_json("speak", text, "--wait", "60")  # the same request
    assert again.read_bytes() == Path(stored["path"]).read_bytes()
    assert abs(len(streamed) - len(again.read_bytes())) < 2048  # same audio, pages as written


def test_a_voice_without_metadata_is_refused_at_start(
    speech_cluster: Cluster, models_home: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad-voice"
    bad.mkdir()
    # An ONNX file without the VITS metadata: sherpa-onnx would kill the process loading it.
    shutil.copy(models_home / "models" / "silero-vad" / "silero_vad.onnx", bad / "model.onnx")
    shutil.copy(models_home / "models" / VOICE / "tokens.txt", bad / "tokens.txt")
    worker = speech_cluster.start_worker("tts", wait=False, MCP_MEDIA_TTS__MODEL_DIR=str(bad))
    assert worker.proc.wait(timeout=120) == 2
    text = worker.text()
    assert "speech probe failed for tts" in text
    assert "metadata" in text
