"""The events of OpenAI's Realtime transcription sessions, as `/v1/realtime` reads and writes
them: the session's settings from `session.update` (the GA shape, `session.type:
"transcription"`) or `transcription_session.update` (the older one), the server's events,
and `error` in OpenAI's shape.

Turns end on `input_audio_buffer.commit`, or, with `server_vad` (its `threshold`,
`prefix_padding_ms` and `silence_duration_ms`), where the speaker stops: that needs the VAD
model the command line hands the door; without one, and for `semantic_vad`, the session is
told so with an error and keeps `turn_detection: null`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Any

from pipelines.speech.chinese_script import split_language
from workers.core.catalog import SttModel
from workers.doors.api.realtime_audio import G711_RATE, OLDER_NAMES, Codec

# Transcription model names a client may send; each is answered by the served whisper.
OPENAI_MODELS = frozenset(
    {"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-4o-transcribe-latest"}
)
RATES = frozenset({8_000, 16_000, 22_050, 24_000, 44_100, 48_000})  # audio/pcm (OpenAI: 24 kHz)


class EventError(Exception):
    """A client event refused: answered with an `error` event, the session goes on."""

    def __init__(self, message: str, *, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param


@dataclass(frozen=True, slots=True)
class ServerVad:
    """OpenAI's `server_vad` settings (its defaults); `create_response`,
    `interrupt_response` and `idle_timeout_ms` are taken and have no effect here."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    def shown(self) -> dict[str, Any]:
        return {"type": "server_vad", "threshold": self.threshold,
                "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What a session's turns are transcribed with."""

    rate: int = 24_000  # of the audio appended (G.711: 8 kHz)
    codec: Codec = Codec.PCM16
    model: str = "whisper-1"
    language: str = ""
    prompt: str = ""  # accepted and ignored, as /v1/audio/transcriptions does
    vad: ServerVad | None = None  # None: turns end on the client's commit


def event_id() -> str:
    return f"event_{secrets.token_hex(10)}"


def item_id() -> str:
    return f"item_{secrets.token_hex(10)}"


def server_event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "event_id": event_id(), **fields}


def error_event(exc: EventError, client_event: str | None = None) -> dict[str, Any]:
    error = {
        "type": "invalid_request_error",
        "code": exc.code,
        "message": exc.message,
        "param": exc.param,
        "event_id": client_event,
    }
    return server_event("error", error=error)


def _object(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EventError(f"`{param}` must be an object", code="invalid_type", param=param)
    return value


def _text(value: Any, param: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise EventError(f"`{param}` must be a string", code="invalid_type", param=param)
    return value


def _transcription(
    config: SessionConfig, model: SttModel, found: dict[str, Any], where: str
) -> SessionConfig:
    name = _text(found.get("model"), f"{where}.model") or config.model
    if name not in OPENAI_MODELS and name != model.id:
        raise EventError(
            f"model {name!r} is not served here: use whisper-1 or {model.id}",
            code="model_not_found",
            param=f"{where}.model",
        )
    language = _text(found.get("language"), f"{where}.language").strip().lower()
    if language and not model.takes(split_language(language)[0]):
        raise EventError(
            f"{model.id} is an English-only model: language {language!r} is not available",
            code="unsupported_language",
            param=f"{where}.language",
        )
    prompt = _text(found.get("prompt"), f"{where}.prompt")
    return replace(config, model=name, language=language, prompt=prompt)


def _unsupported(param: str, why: str) -> EventError:
    return EventError(
        f"{why}: set `turn_detection` to null and end each turn with"
        " input_audio_buffer.commit (the rest of the update applies)",
        code="unsupported_turn_detection",
        param=param,
    )


def _number(found: dict[str, Any], name: str, default: float, top: float, param: str) -> float:
    value = found.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= top:
        raise EventError(
            f"`{name}` must be a number from 0 to {top:g}", code="invalid_value",
            param=f"{param}.{name}",
        )  # fmt: skip
    return float(value)


def _turn_detection(value: Any, param: str, vad_ready: bool) -> ServerVad | None:
    """The session's server VAD; an EventError when it cannot be had (turns then end on
    commit)."""
    if value is None:
        return None
    found = _object(value, param)
    kind = found.get("type", "server_vad")
    if kind != "server_vad":
        raise _unsupported(f"{param}.type", f"turn detection {str(kind)[:40]!r} is not served")
    if not vad_ready:
        raise _unsupported(param, "server-side turn detection is not available here (no VAD model)")
    base = ServerVad()
    return ServerVad(
        threshold=_number(found, "threshold", base.threshold, 1.0, param),
        prefix_padding_ms=int(
            _number(found, "prefix_padding_ms", base.prefix_padding_ms, 10_000, param)
        ),
        silence_duration_ms=int(
            _number(found, "silence_duration_ms", base.silence_duration_ms, 10_000, param)
        ),
    )


def _format(config: SessionConfig, value: Any, param: str) -> SessionConfig:
    """GA `{"type": "audio/pcm", "rate": 24000}` (or `audio/pcmu`, `audio/pcma`), or the
    older `"pcm16"` (`g711_ulaw`, `g711_alaw`)."""
    if value is None:
        return config
    if isinstance(value, str):
        if value not in OLDER_NAMES:
            raise EventError(
                f"audio format {value!r} is not taken here: use {', '.join(OLDER_NAMES)}",
                code="unsupported_audio_format",
                param=param,
            )
        codec = OLDER_NAMES[value]
        return replace(config, codec=codec, rate=24_000 if codec is Codec.PCM16 else G711_RATE)
    found = _object(value, param)
    try:
        codec = Codec(str(found.get("type")))
    except ValueError:
        raise EventError(
            f"audio format {found.get('type')!r} is not taken here: use one of {', '.join(Codec)}",
            code="unsupported_audio_format",
            param=f"{param}.type",
        ) from None
    if codec is not Codec.PCM16:
        return replace(config, codec=codec, rate=G711_RATE)
    rate = found.get("rate", 24_000)
    if rate not in RATES:
        raise EventError(
            f"rate must be one of {', '.join(str(r) for r in sorted(RATES))}",
            code="invalid_value",
            param=f"{param}.rate",
        )
    return replace(config, codec=codec, rate=int(rate))


def updated(
    config: SessionConfig, model: SttModel, event: dict[str, Any], older: bool, vad_ready: bool
) -> tuple[SessionConfig, EventError | None]:
    """The session after an update event, and the refusal of its turn detection if any (the
    rest applies, turns ending on commit); a bad field refuses the whole update (EventError).
    `vad_ready`: server VAD can be had."""
    session = _object(event.get("session"), "session")
    refusal = None
    if older:
        config = _format(config, session.get("input_audio_format"), "session.input_audio_format")
        found = _object(
            session.get("input_audio_transcription"), "session.input_audio_transcription"
        )
        config = _transcription(config, model, found, "session.input_audio_transcription")
        detection_param = "session.turn_detection"
        detection = session.get("turn_detection")
    else:
        kind = session.get("type", "transcription")
        if kind != "transcription":
            raise EventError(
                f"session type {kind!r} is not served here: this endpoint transcribes only"
                ' (session.type "transcription")',
                code="invalid_value",
                param="session.type",
            )
        audio = _object(
            _object(session.get("audio"), "session.audio").get("input"), "session.audio.input"
        )
        config = _format(config, audio.get("format"), "session.audio.input.format")
        found = _object(audio.get("transcription"), "session.audio.input.transcription")
        config = _transcription(config, model, found, "session.audio.input.transcription")
        detection_param = "session.audio.input.turn_detection"
        detection = audio.get("turn_detection")
    try:
        vad = _turn_detection(detection, detection_param, vad_ready)
    except EventError as exc:
        vad, refusal = None, exc
    return replace(config, vad=vad), refusal


def session_object(session_id: str, config: SessionConfig, older: bool) -> dict[str, Any]:
    """The session as `session.created` / `.updated` show it (older: the beta shape)."""
    transcription = {"model": config.model, "language": config.language, "prompt": config.prompt}
    detection = None if config.vad is None else config.vad.shown()
    if older:
        return {
            "id": session_id,
            "object": "realtime.transcription_session",
            "input_audio_format": _older_name(config.codec),
            "input_audio_transcription": transcription,
            "turn_detection": detection,
            "input_audio_noise_reduction": None,
        }
    return {
        "type": "transcription",
        "object": "realtime.transcription_session",
        "id": session_id,
        "audio": {
            "input": {
                "format": _format_object(config),
                "transcription": transcription,
                "turn_detection": detection,
                "noise_reduction": None,
            }
        },
        "include": [],
    }


def _older_name(codec: Codec) -> str:
    return next(name for name, found in OLDER_NAMES.items() if found is codec)


def _format_object(config: SessionConfig) -> dict[str, Any]:
    if config.codec is Codec.PCM16:
        return {"type": config.codec.value, "rate": config.rate}
    return {"type": config.codec.value}
