"""Settings -> speech configs and engines, and the speech stages as the workers run them."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError, PermanentError
from pipelines.media import MediaKind, StoredBlob
from pipelines.results import StageOutcome, Status, processor_version
from pipelines.speech.stt import SttConfig, Transcriber, load_transcriber, load_vad, transcribe
from pipelines.speech.tts import TextToSpeech, TtsConfig, load_tts
from pipelines.speech.vad import SpeechDetector
from workers.settings import Settings

STT_DEFAULT = "whisper-tiny.en"
VAD_DEFAULT = "silero-vad"


def stt_config(settings: Settings) -> SttConfig:
    model_dir = settings.stt.model_dir or settings.models_root / STT_DEFAULT
    vad = settings.stt.vad_model or settings.models_root / VAD_DEFAULT / "silero_vad.onnx"
    if settings.stt.vad_model is not None and not vad.exists():
        raise ConfigError(f"MCP_MEDIA_STT__VAD_MODEL {vad} does not exist")
    return SttConfig(
        model_dir=model_dir,
        vad_model=vad if vad.exists() else None,
        threads=settings.stt.threads,
        max_seconds=settings.stt.max_seconds,
        max_bytes=settings.max_blob_bytes,
    )


def tts_config(settings: Settings) -> TtsConfig:
    ts = settings.tts
    return TtsConfig(
        model_dir=ts.model_dir or settings.models_root / ts.voice,
        threads=ts.threads,
        speed=ts.speed,
        max_chars=ts.max_chars,
        noise_scale=ts.noise_scale,
        noise_scale_w=ts.noise_scale_w,
    )


def _model_fingerprint(model_dir: Path) -> str:
    """The manifest's file hashes when there is one; else names, sizes and mtimes."""
    manifest = model_dir / "manifest.json"
    try:
        data = json.loads(manifest.read_text())
        hashes = {name: entry["sha256"] for name, entry in data["files"].items()}
        return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    try:
        parts = sorted(
            (p.name, p.stat().st_size, p.stat().st_mtime_ns)
            for p in model_dir.iterdir()
            if p.is_file()
        )
    except OSError:
        return "missing"
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def stt_version(settings: Settings) -> str:
    config = stt_config(settings)
    return processor_version(
        "stt",
        1,
        _model_fingerprint(config.model_dir),
        config.language,
        config.vad_model is not None,
        config.single_pass_s,
        config.max_segment_s,
    )


def tts_version(settings: Settings) -> str:
    config = tts_config(settings)
    return processor_version(
        "tts",
        1,
        _model_fingerprint(config.model_dir),
        config.voice,
        config.speaker_id,
        config.noise_scale,
        config.noise_scale_w,
        config.sentence_pause_s,
    )


def build_transcriber(settings: Settings) -> tuple[Transcriber, SpeechDetector | None]:
    config = stt_config(settings)
    return load_transcriber(config), load_vad(config)


def build_synthesizer(settings: Settings) -> TextToSpeech:
    return load_tts(tts_config(settings))


def run_transcribe(
    engines: tuple[Transcriber, SpeechDetector | None], settings: Settings, path: Path
) -> StageOutcome:
    transcriber, detector = engines
    if detector is not None:
        detector.reset()
    transcript = transcribe(path, transcriber, stt_config(settings), detector)
    return StageOutcome(Status.DONE, transcript.to_dict())


def synthesis_request(
    text: str, settings: Settings, fmt: str | None = None, speed: float | None = None
) -> dict[str, Any]:
    """The parameters of one TTS job; their hash is the job's content key."""
    if fmt not in (None, "ogg", "wav"):
        raise PermanentError(f"unknown audio format {fmt!r}: use ogg or wav")
    return {
        "text": text,
        "voice": settings.tts.voice,
        "speed": speed if speed is not None else settings.tts.speed,
        "format": fmt or settings.tts.format,
    }


def store_request(settings: Settings, params: Mapping[str, Any]) -> StoredBlob:
    """The request goes into the cache as a document: messages carry its path, not its text."""
    blob = json.dumps(dict(params), sort_keys=True, ensure_ascii=False).encode()
    return settings.media_cache().store_bytes(
        blob, MediaKind.DOCUMENT, mime="application/json", name="speech-request.json"
    )


def read_request(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PermanentError(f"cannot read the synthesis request {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise PermanentError(f"{path} is not a synthesis request")
    return data


def run_synthesize(tts: TextToSpeech, settings: Settings, path: Path) -> StageOutcome:
    params = read_request(path)
    text = params.get("text")
    fmt = params.get("format", "ogg")
    if not isinstance(text, str) or fmt not in ("ogg", "wav"):
        raise PermanentError("a synthesis job needs `text` and a format of ogg or wav")
    speed = float(params.get("speed", settings.tts.speed))
    if not 0.2 < speed <= 4.0:
        raise PermanentError(f"speed {speed} is outside 0.2-4.0")
    if speed != tts.config.speed:  # same loaded voice, another pace
        tts = TextToSpeech(tts.synthesizer, tts.phonemizer, replace(tts.config, speed=speed))
    scratch = settings.home / "tmp"
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = scratch / f"speech-{secrets.token_hex(8)}.{fmt}"
    try:
        speech = tts.synthesize_to_file(text, tmp, fmt)
        stored = settings.media_cache().store_file(tmp, MediaKind.AUDIO)
    finally:
        tmp.unlink(missing_ok=True)
    voice_ready = fmt == "ogg"
    tag = f"MEDIA:{stored.path}"
    return StageOutcome(
        Status.DONE,
        {
            "path": str(stored.path),
            "format": fmt,
            "duration_s": round(speech.duration_s, 3),
            "media_tag": ("[[audio_as_voice]]\n" + tag) if voice_ready else tag,
            "sample_rate": speech.sample_rate,
            "sentences": speech.sentences,
            "audio_sha256": stored.sha256,
        },
    )
