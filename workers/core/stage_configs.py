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

from pipelines.digest import DigestConfig
from pipelines.errors import ConfigError, PermanentError
from pipelines.media import MediaKind, StoredBlob
from pipelines.results import processor_version
from pipelines.speech.blend import BlendError, is_blend, parse_blend
from pipelines.speech.chinese_script import SCRIPTS, split_language
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.layout import Engine, engine_or_default, is_multilingual
from pipelines.speech.request import FORMATS, SynthesisRequest
from pipelines.vision import ProviderKind, VisionConfig
from pipelines.vision import processor_version as vision_processor_version
from workers.core.settings import Settings

STT_DEFAULT = "whisper-tiny.en"
VAD_DEFAULT = "silero-vad"
SPEECH_FORMATS = FORMATS  # what a synthesis request may ask for


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


def _stt_language(model_dir: Path, language: str) -> str:
    """The configured language, else "en" for English-only models and "" (detect) for others."""
    if language:
        return language
    return "" if is_multilingual(model_dir) else "en"


def stt_config(settings: Settings, options: Mapping[str, str] | None = None) -> SttConfig:
    """`options`: a job's own choices (`stt_options`), over the settings'."""
    model_dir = settings.stt.model_dir or settings.models_root / settings.stt.model
    vad = settings.stt.vad_model or settings.models_root / VAD_DEFAULT
    if settings.stt.vad_model is not None and not vad.exists():
        raise ConfigError(f"MCP_MEDIA_STT__VAD_MODEL {vad} does not exist")
    config = SttConfig(
        model_dir=model_dir,
        vad_model=vad if vad.exists() else None,
        threads=settings.stt.threads,
        language=_stt_language(model_dir, settings.stt.language),
        chinese_script=settings.stt.chinese_script,
        max_seconds=settings.stt.max_seconds,
        max_bytes=settings.max_blob_bytes,
        engine=settings.stt.engine,
        batch_windows=settings.stt.batch_windows,
    )
    given = stt_options(options)
    return replace(
        config,
        language=given.get("language", config.language),
        task=given.get("task", config.task),
        chinese_script=given.get("script", config.chinese_script),
        word_timestamps=given.get("words") == "1",
    )


def _voice_names(catalogue: Path) -> set[str]:
    try:
        return {str(v["name"]) for v in json.loads(catalogue.read_text(encoding="utf-8"))}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def tts_model(
    settings: Settings, voice: str | None = None, *, strict: bool = False
) -> tuple[Path, str]:
    """(model folder, voice name within it or "") for a voice or model name.

    A name nothing under ``models/`` knows is taken as a folder still to be prepared (the
    versions of a client without models stay computable); ``strict`` refuses it instead.
    """
    name = voice or settings.tts.voice
    if settings.tts.model_dir is not None:
        folder = settings.tts.model_dir
        return folder, voice or (name if name in _voice_names(folder / "voices.json") else "")
    root = settings.models_root
    if (root / name).is_dir():
        return root / name, ""
    for catalogue in sorted(root.glob("*/voices.json")):
        if name in _voice_names(catalogue):
            return catalogue.parent, name
    if is_blend(name):  # a blend of a Kokoro folder's voices: the folder of its first voice
        try:
            first = parse_blend(name)[0].name
        except BlendError:
            first = ""  # not a blend after all: a folder still to be prepared, or nothing
        for catalogue in sorted(root.glob("*/voices.json")):
            if first in _voice_names(catalogue):
                return catalogue.parent, name
    if not strict:
        return root / name, ""
    raise ConfigError(
        f"no voice or model {name!r} under {root}: prepare it with"
        " `mcp-media models prepare --tier quality`, or see `mcp-media models list`"
    )


def tts_config(settings: Settings, voice: str | None = None) -> TtsConfig:
    ts = settings.tts
    model_dir, speaker = tts_model(settings, voice)
    return TtsConfig(
        model_dir=model_dir,
        voice=speaker,
        threads=ts.threads,
        speed=ts.speed,
        max_chars=ts.max_chars,
        noise_scale=ts.noise_scale,
        noise_scale_w=ts.noise_scale_w,
        engine=ts.engine,
        first_chunk_words=ts.first_chunk_words,
    )


def engine_named(config: SttConfig | TtsConfig) -> str:
    """The engine that runs `config`'s folder (its setting, `auto` resolved by the folder's
    layout): what results name and what keys them apart."""
    kind = "stt" if isinstance(config, SttConfig) else "tts"
    return engine_or_default(config.engine, config.model_dir, kind)


def _engine_part(config: SttConfig | TtsConfig) -> list[str]:
    """Nothing for the native engines (their keys stay what they were); the engine's name
    otherwise, so results of different engines never share a cache entry."""
    engine = engine_named(config)
    return [] if engine == Engine.NATIVE else [engine]


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


# Bumped when the digest stage's output changes for the same settings.
_DIGEST_REVISION = 4  # 4: the excerpt and its count in the Markdown's own offsets
DIGEST_EXTRACTOR = "pdfium+stdlib"


def digest_config(settings: Settings) -> DigestConfig:
    docs = settings.documents
    return DigestConfig(
        max_pages=docs.max_pages,
        max_chars=docs.max_chars,
        excerpt_chars=docs.excerpt_chars,
        timeout_s=docs.timeout,
        address_space=docs.memory_mib * 1024 * 1024,
        ocr_pages=docs.ocr_pages,
    )


def digest_version(settings: Settings) -> str:
    """Keyed by the extractor and every cap that changes the output (not the timeout)."""
    config = digest_config(settings)
    return processor_version(
        "document.digest",
        _DIGEST_REVISION,
        DIGEST_EXTRACTOR,
        config.max_pages,
        config.max_chars,
        config.excerpt_chars,
        config.address_space,
        config.ocr_pages,
    )


def stt_options(params: Mapping[str, Any] | None) -> dict[str, str]:
    """The job's STT options that differ from what the worker does by default: a language
    code (checked; a tag such as zh-TW is the language and the Chinese script it names),
    the script of Chinese transcripts, `task` when it is not a plain transcription, and
    `words` ("1") when each word is to be timed."""
    given = params or {}
    options: dict[str, str] = {}
    language = request_language(given)
    script = given.get("script") or None
    if language:
        options["language"], named = split_language(language)
        script = script or named
    if script is not None:
        if not isinstance(script, str) or script not in SCRIPTS:
            raise PermanentError(f"Chinese script {script!r} is not one of {', '.join(SCRIPTS)}")
        options["script"] = script
    task = given.get("task")
    if task not in (None, "", "transcribe"):
        if task != "translate":
            raise PermanentError(f"task {task!r} is not transcribe or translate")
        options["task"] = "translate"
    words = given.get("words")
    if words not in (None, "", "0", False):
        if words not in ("1", True):
            raise PermanentError(f"words {words!r} is not 1 (time each word) or 0")
        options["words"] = "1"
    return options


def request_language(params: Mapping[str, Any] | None) -> str | None:
    language = (params or {}).get("language")
    if language is None or language == "":
        return None
    if not isinstance(language, str) or not language.replace("-", "").isalpha():
        raise PermanentError(f"language {language!r} is not a language code such as en or zh")
    return language.lower()


def stt_version(settings: Settings, params: Mapping[str, Any] | None = None) -> str:
    """A job's own options change the output, so they are part of its version; a language
    the model uses anyway (en on an English-only model) is not."""
    announced = stt_announcement(settings)
    return stt_keyed(announced, params)


def stt_announcement(settings: Settings) -> dict[str, Any]:
    """What a worker announces of its STT: the version of a default job and the language
    its model uses by default (what `stt_keyed` needs to key any job like this worker)."""
    config = stt_config(settings)
    base = processor_version(
        "stt",
        # 2: timestamped windows over the laid-out speech; 3: Mandarin in a chosen script,
        # silence never decoded, times from the speech's start, whisper's decoding figures;
        # 4: long audio read in batches of windows cut where nobody speaks (batch_windows);
        # 5: a long region is cut in a pause, never mid-word (the batches' windows end there)
        5,
        config.chinese_script,
        _model_fingerprint(config.model_dir),
        config.language,
        config.vad_model is not None,
        config.single_pass_s,
        config.max_segment_s,
        config.tail_padding_s,
        config.single_pass_silence_s,
        config.batch_windows,
        *_engine_part(config),
    )
    return {"version": base, "language": config.language, "script": config.chinese_script}


WORDS_REVISION = 2


def stt_keyed(announced: Mapping[str, Any], params: Mapping[str, Any] | None) -> str:
    options = stt_options(params)
    for name in ("language", "script"):
        if options.get(name) == announced.get(name):
            del options[name]
    base = str(announced["version"])
    # Word times have their own revision, so only word-timed results are done again:
    # 2: a word after punctuation starts where sound begins under it.
    revision = [("words_revision", WORDS_REVISION)] if "words" in options else []
    # Default jobs keep the version they always had: their results stay valid.
    return processor_version(base, sorted(options.items()) + revision) if options else base


def tts_version(settings: Settings, params: Mapping[str, Any] | None = None) -> str:
    """The voice is not in it: every synthesis request carries its voice in its content
    (the key's sha256), and one loaded model serves all of its voices."""
    config = tts_config(settings)
    return processor_version(
        "tts",
        1,
        _model_fingerprint(config.model_dir),
        "",  # was the espeak voice override, always "" here: kept so keys do not move
        0,  # was the speaker id, likewise
        config.noise_scale,
        config.noise_scale_w,
        config.sentence_pause_s,
        *_engine_part(config),
        # Set, it changes every voice's output; unset (the engine's own), keys do not move.
        *(() if config.first_chunk_words is None else (config.first_chunk_words,)),
        *_kokoro_part(config),
    )


# Our own Kokoro engine's output changed: 2 = the style row for n ids is n - 1 (it was n),
# and a Chinese first sentence is cut only at a clause mark (it was cut inside words too).
KOKORO_REVISION = 2


def _kokoro_part(config: TtsConfig) -> list[str]:
    """Kokoro folders on the native engine move to the engine's current revision; other
    voices' keys stay (a Kokoro folder holds `voices.bin`)."""
    native = engine_named(config) == Engine.NATIVE
    return (
        [f"kokoro-{KOKORO_REVISION}"]
        if native and (config.model_dir / "voices.bin").is_file()
        else []
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


# The name a speech request is cached under (a document no digest is for).
SPEECH_REQUEST = "speech-request.json"


def store_request(settings: Settings, params: Mapping[str, Any]) -> StoredBlob:
    """The request goes into the cache as a document: messages carry its path, not its text."""
    request = SynthesisRequest(
        text=params["text"], voice=params["voice"], speed=params["speed"], format=params["format"]
    )
    blob = request.to_bytes()
    return settings.media_cache().store_bytes(
        blob, MediaKind.DOCUMENT, mime="application/json", name=SPEECH_REQUEST
    )
