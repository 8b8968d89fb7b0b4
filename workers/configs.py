"""Settings -> the frozen configs the stages take, and each capability's processor version.

Light on purpose: the client computes versions (dedup keys) without loading any engine, so
nothing here imports numpy, PyAV, sherpa-onnx or an OCR engine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError, PermanentError
from pipelines.media import MediaKind, StoredBlob
from pipelines.results import processor_version
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.vision import ProviderKind, VisionConfig
from pipelines.vision import processor_version as vision_processor_version
from workers.settings import Settings

STT_DEFAULT = "whisper-tiny.en"
VAD_DEFAULT = "silero-vad"
# `pipelines.speech.encode.FORMATS`, named here without importing PyAV.
SPEECH_FORMATS = ("ogg", "wav", "mp3", "aac", "flac", "pcm")
# Per-job STT options that change the transcript, with the value that changes nothing.
STT_OPTIONS = {"language": "en", "task": "transcribe"}


def vision_config(settings: Settings) -> VisionConfig:
    vs = settings.vision
    provider = ProviderKind(vs.resolved_provider)
    extra: dict[str, Any] = {}
    if vs.prompt:
        extra["prompt"] = vs.prompt
    return VisionConfig(
        provider=provider,
        base_url=vs.base_url,
        api_key=vs.api_key.get_secret_value(),
        model=vs.resolved_model() if provider is ProviderKind.OPENAI else "",
        timeout=vs.timeout,
        max_side=vs.max_side,
        min_side=vs.min_side,
        max_output_chars=vs.max_output_chars,
        max_concurrency=vs.max_concurrency,
        **extra,
    )


def stt_config(settings: Settings, options: Mapping[str, str] | None = None) -> SttConfig:
    model_dir = settings.stt.model_dir or settings.models_root / STT_DEFAULT
    vad = settings.stt.vad_model or settings.models_root / VAD_DEFAULT / "silero_vad.onnx"
    if settings.stt.vad_model is not None and not vad.exists():
        raise ConfigError(f"MCP_MEDIA_STT__VAD_MODEL {vad} does not exist")
    config = SttConfig(
        model_dir=model_dir,
        vad_model=vad if vad.exists() else None,
        threads=settings.stt.threads,
        max_seconds=settings.stt.max_seconds,
        max_bytes=settings.max_blob_bytes,
    )
    given = stt_options(options)
    return replace(
        config,
        language=given.get("language", config.language),
        task=given.get("task", config.task),
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


def vision_version(settings: Settings) -> str:
    return vision_processor_version(vision_config(settings))


def stt_options(params: Mapping[str, Any] | None) -> dict[str, str]:
    """The job's STT options that differ from what the worker does by default."""
    given = params or {}
    return {
        name: str(given[name])
        for name, default in STT_OPTIONS.items()
        if given.get(name) not in (None, default)
    }


def stt_version(settings: Settings, params: Mapping[str, Any] | None = None) -> str:
    config = stt_config(settings)
    options = stt_options(params)
    if options.get("language") == config.language:
        del options["language"]
    base = processor_version(
        "stt",
        1,
        _model_fingerprint(config.model_dir),
        config.language,
        config.vad_model is not None,
        config.single_pass_s,
        config.max_segment_s,
        config.tail_padding_s,
        config.single_pass_silence_s,
    )
    # Default jobs keep the version they always had: their results stay valid.
    return processor_version(base, sorted(options.items())) if options else base


def tts_version(settings: Settings, params: Mapping[str, Any] | None = None) -> str:
    # The job's own options (voice, speed, format) are in its request document, whose
    # sha256 is the job's content key: they need no place in the version.
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


def synthesis_request(
    text: str,
    settings: Settings,
    fmt: str | None = None,
    speed: float | None = None,
    voice: str | None = None,
) -> dict[str, Any]:
    """The parameters of one TTS job; their hash is the job's content key."""
    if fmt not in (None, *SPEECH_FORMATS):
        raise PermanentError(f"unknown audio format {fmt!r}: use {', '.join(SPEECH_FORMATS)}")
    return {
        "text": text,
        "voice": voice or settings.tts.voice,
        "speed": speed if speed is not None else settings.tts.speed,
        "format": fmt or settings.tts.format,
    }


def store_request(settings: Settings, params: Mapping[str, Any]) -> StoredBlob:
    """The request goes into the cache as a document: messages carry its path, not its text."""
    blob = json.dumps(dict(params), sort_keys=True, ensure_ascii=False).encode()
    return settings.media_cache().store_bytes(
        blob, MediaKind.DOCUMENT, mime="application/json", name="speech-request.json"
    )
