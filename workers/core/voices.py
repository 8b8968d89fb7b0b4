"""The voices prepared here, by name: each piper folder under ``models/`` and each voice of a
Kokoro folder (``voices.json``), OpenAI's voice names mapped onto them, and Kokoro blends
(`pipelines.speech.blend`). Every door resolves a voice here, so HTTP, MCP and the CLI accept
the same names. Read from the folders' small JSON files, never a loaded model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.speech.blend import BlendError, canonical, is_blend, parse_blend
from workers.core.settings import Settings

# OpenAI's voices; each maps to a prepared voice (MCP_MEDIA_API__VOICES, else the default).
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse",
)  # fmt: skip
# OpenAI's voices speak English: by default they map to an English voice.
OPENAI_LANGUAGE = "en"


class VoiceNotFound(ValueError):
    """A voice name nothing prepared here answers to; the message says where to look."""


@dataclass(frozen=True, slots=True)
class Voice:
    id: str
    language: str  # en-us, en-gb, zh, ... ("" when the folder does not say)
    model: str  # the folder under models/ that speaks it

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.id, "language": self.language, "model": self.model}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _piper_language(folder: Path) -> str:
    config = _read_json(folder / "model.onnx.json")
    if not isinstance(config, dict):
        return ""
    espeak = config.get("espeak")
    if isinstance(espeak, dict) and isinstance(espeak.get("voice"), str):
        return str(espeak["voice"]).lower()
    language = config.get("language")
    code = language.get("code") if isinstance(language, dict) else None
    return str(code).replace("_", "-").lower() if isinstance(code, str) else ""


def _kokoro_voices(folder: Path) -> list[Voice]:
    listed = _read_json(folder / "voices.json")
    found = []
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            found.append(Voice(entry["name"], str(entry.get("language", "")), folder.name))
    return found


def tts_folders(settings: Settings) -> list[str]:
    """Prepared TTS model folders (a model and its tokens: piper or Kokoro)."""
    try:
        folders = sorted(settings.models_root.iterdir())
    except OSError:
        return []
    return [
        f.name for f in folders if (f / "model.onnx").is_file() and (f / "tokens.txt").is_file()
    ]


def prepared_voices(settings: Settings) -> list[Voice]:
    """Every voice by its own name: piper folders, then each Kokoro voice."""
    root = settings.models_root
    found: list[Voice] = []
    for name in tts_folders(settings):
        folder = root / name
        if (folder / "voices.bin").is_file():
            found.extend(_kokoro_voices(folder))
        else:
            found.append(Voice(name, _piper_language(folder), name))
    return found


def _by_name(settings: Settings) -> dict[str, Voice]:
    named: dict[str, Voice] = {}
    for voice in prepared_voices(settings):
        named.setdefault(voice.id, voice)  # a name two folders share: the first folder's
    return named


def _language_of(name: str, named: dict[str, Voice]) -> str | None:
    if name in named:
        return named[name].language
    firsts = [v for v in named.values() if v.model == name]  # a Kokoro folder: its first voice
    return firsts[0].language if firsts else None


def default_voice(settings: Settings, language: str = OPENAI_LANGUAGE) -> str:
    """The configured voice when it speaks `language` (or nothing says what it speaks), else
    the first prepared voice that does, of the configured voice's model first (loaded
    already), else the configured one."""
    named = _by_name(settings)
    configured = settings.tts.voice
    spoken = _language_of(configured, named)
    if not spoken or spoken.split("-")[0] == language:
        return configured
    model = named[configured].model if configured in named else configured
    speaking = [v for v in named.values() if v.language.split("-")[0] == language]
    speaking.sort(key=lambda voice: voice.model != model)  # stable: folder order otherwise
    return speaking[0].id if speaking else configured


def aliases(settings: Settings) -> dict[str, str]:
    given = settings.api.voices
    default = default_voice(settings)
    return {name: given.get(name, default) for name in OPENAI_VOICES}


def _where_to_look() -> str:
    return (
        f"use one of {', '.join(OPENAI_VOICES)}, a prepared voice (GET /v1/audio/voices, "
        f"`mcp-media models list`) or a blend of one Kokoro folder's voices such as "
        "af_bella+af_sky"
    )


def _in_model(voice: Voice, model: str | None) -> bool:
    return model is None or voice.model == model


def resolve_voice(
    settings: Settings, voice: str, model: str | None = None, *, here: bool = True
) -> str:
    """The voice a synthesis request names for `voice` (and `model`, a prepared folder, when
    the caller chose one): an OpenAI name -> its mapped voice (or `model` itself), a prepared
    voice -> itself, a blend -> its canonical spelling. `VoiceNotFound` for anything else.
    `here=False`: a client with no voice prepared here passes other names on to the worker."""
    named = _by_name(settings)
    if voice in OPENAI_VOICES:
        if model is not None and voice not in settings.api.voices:
            return model  # the folder's own voice (a Kokoro folder: its first)
        return aliases(settings)[voice]
    if not here and not named:
        return voice
    if voice in named or voice == settings.tts.voice or voice in tts_folders(settings):
        known = named.get(voice)
        if known is not None and not _in_model(known, model):
            raise VoiceNotFound(
                f"voice {voice!r} belongs to model {known.model!r}, not {model!r}: name that "
                f"model, or tts-1"
            )
        if known is None and model is not None and voice != model:
            raise VoiceNotFound(f"voice {voice!r} is not a voice of model {model!r}")
        return voice
    if is_blend(voice):
        return _resolve_blend(voice, named, model)
    raise VoiceNotFound(f"unknown voice {voice!r}: {_where_to_look()}")


def _resolve_blend(spec: str, named: dict[str, Voice], model: str | None) -> str:
    try:
        parts = parse_blend(spec)
    except BlendError as exc:
        raise VoiceNotFound(str(exc)) from None
    voices = []
    for part in parts:
        found = named.get(part.name)
        if found is None or not _in_model(found, model):
            where = f" of model {model!r}" if model else ""
            raise VoiceNotFound(
                f"voice {part.name!r} in blend {spec!r} is not a prepared Kokoro voice{where}"
                " (GET /v1/audio/voices)"
            )
        voices.append(found)
    if len({v.model for v in voices}) > 1:
        raise VoiceNotFound(f"blend {spec!r} mixes voices of different models")
    if any(v.model == v.id for v in voices):
        raise VoiceNotFound(f"blend {spec!r}: only a Kokoro folder's voices blend")
    languages = {v.language.split("-")[0] for v in voices}
    if len(languages) > 1:
        named_langs = ", ".join(f"{v.id} ({v.language})" for v in voices)
        raise VoiceNotFound(f"blend {spec!r} mixes languages: {named_langs}; blend one language")
    return canonical(parts)
