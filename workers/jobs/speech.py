"""The speech engines of one process and the speech stages as jobs run them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.errors import PermanentError
from pipelines.media import MediaKind
from pipelines.results import StageOutcome, Status
from pipelines.speech.stt import Transcriber, load_transcriber, load_vad, transcribe
from pipelines.speech.tts import TextToSpeech, load_tts
from pipelines.speech.vad import SpeechDetector
from workers.configs import SPEECH_FORMATS, request_language, stt_config, tts_config, tts_model
from workers.settings import Settings


def build_transcriber(settings: Settings) -> tuple[Transcriber, SpeechDetector | None]:
    config = stt_config(settings)
    return load_transcriber(config), load_vad(config)


def build_synthesizer(settings: Settings) -> TextToSpeech:
    return load_tts(tts_config(settings))


def run_transcribe(
    engines: tuple[Transcriber, SpeechDetector | None],
    settings: Settings,
    path: Path,
    params: Mapping[str, Any] | None = None,
) -> StageOutcome:
    transcriber, detector = engines
    if detector is not None:
        detector.reset()
    config = stt_config(settings, request_language(params))
    transcript = transcribe(path, transcriber, config, detector)
    return StageOutcome(Status.DONE, transcript.to_dict())


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
    if not isinstance(text, str) or fmt not in SPEECH_FORMATS:
        raise PermanentError("a synthesis job needs `text` and a format of ogg or wav")
    speed = float(params.get("speed", settings.tts.speed))
    if not 0.2 < speed <= 4.0:
        raise PermanentError(f"speed {speed} is outside 0.2-4.0")
    voice = params.get("voice")
    if voice is not None and not isinstance(voice, str):
        raise PermanentError(f"voice {voice!r} is not a voice name")
    if voice and voice != settings.tts.voice:
        folder, speaker = tts_model(settings, voice, strict=True)
        if folder != tts.config.model_dir:
            raise PermanentError(
                f"voice {voice!r} is in {folder.name}; this worker runs {tts.config.model_dir.name}"
            )
        voice = speaker
    else:
        voice = None
    tts = tts.for_voice(voice, speed)  # same loaded model: another voice, another pace
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
