"""What the workers serve, and every name a door accepts for it: one truth of capability.

A worker announces, with each capability's version, what it serves (`workers.core.offers`:
its voices with their languages and models, its TTS models, its STT model, whether that
model takes other languages than English and can time words). Every door lists and accepts
from a `Catalog`: the cluster's gateway builds it from the live workers' announcements, the
in-process gateway from its own folders (the announcement a worker of this node would
make). A door never reads model folders, so a door on a node with no models serves what its
workers serve.

Voices resolve here for every door: a voice by its own name, OpenAI's names mapped onto an
English voice (or MCP_MEDIA_API__VOICES), a Kokoro blend (`pipelines.speech.blend`) in its
canonical spelling. A catalog with no voices (no TTS worker has announced any) passes names
on to the worker, which refuses what it cannot speak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipelines.speech.blend import BlendError, canonical, is_blend, parse_blend

# OpenAI's voices; each maps to a served voice (MCP_MEDIA_API__VOICES, else the default).
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse",
)  # fmt: skip
OPENAI_LANGUAGE = "en"  # OpenAI's voices speak English: by default they map to an English voice


class VoiceNotFound(ValueError):
    """A voice name no serving worker answers to; the message says where to look."""


@dataclass(frozen=True, slots=True)
class Voice:
    id: str
    language: str  # en-us, en-gb, zh, ... ("" when the folder does not say)
    model: str  # the folder under models/ that speaks it

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.id, "language": self.language, "model": self.model}


@dataclass(frozen=True, slots=True)
class TtsModel:
    id: str  # the folder under models/
    engine: str  # the engine that runs it (native, sherpa)


@dataclass(frozen=True, slots=True)
class SttModel:
    id: str  # the folder under models/
    multilingual: bool  # False: English only
    word_timestamps: bool  # its export carries the alignment that times words
    engine: str = ""

    def takes(self, language: str) -> bool:
        """Can it be asked for `language` (a base code: en, zh, ...)?"""
        return self.multilingual or language == "en"


def _entries(value: Any) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Catalog:
    """What the serving workers offer; empty where nothing was announced (no live worker)."""

    voices: tuple[Voice, ...] = ()  # every voice by its own name, the configured one first
    tts_models: tuple[TtsModel, ...] = ()
    voice: str = ""  # the workers' configured voice
    stt: SttModel | None = None

    @classmethod
    def announced(
        cls, tts: Mapping[str, Any] | None, stt: Mapping[str, Any] | None, voice: str = ""
    ) -> Catalog:
        """From the announcements of the TTS and STT capabilities (None: nobody serves it);
        `voice`: the default voice while no TTS worker names one. What does not parse is
        left out, never guessed."""
        voices: list[Voice] = []
        models: list[TtsModel] = []
        if tts is not None:
            voice = str(tts.get("voice") or voice)
            for entry in _entries(tts.get("voices")):
                ident, model = entry.get("id"), entry.get("model")
                if isinstance(ident, str) and isinstance(model, str):
                    voices.append(Voice(ident, str(entry.get("language") or ""), model))
            for entry in _entries(tts.get("models")):
                if isinstance(entry.get("id"), str):
                    models.append(TtsModel(entry["id"], str(entry.get("engine") or "")))
        model = None
        if stt is not None and isinstance(stt.get("model"), str):
            model = SttModel(
                stt["model"],
                stt.get("multilingual") is True,
                stt.get("word_timestamps") is True,
                str(stt.get("engine") or ""),
            )
        return cls(tuple(voices), tuple(models), voice, model)

    def named(self) -> dict[str, Voice]:
        found: dict[str, Voice] = {}
        for voice in self.voices:
            found.setdefault(voice.id, voice)  # a name two folders share: the first folder's
        return found

    def model_of(self, voice: str) -> TtsModel | None:
        """The model that speaks `voice`: a voice's folder, a folder itself, or the folder of
        a blend's first voice."""
        named = self.named()
        name = voice
        if voice not in named and is_blend(voice):  # a piper folder's name has dashes too
            try:
                name = parse_blend(voice)[0].name
            except BlendError:
                return None
        found = named.get(name)
        ident = found.model if found is not None else name
        return next((m for m in self.tts_models if m.id == ident), None)

    def default_voice(self, language: str = OPENAI_LANGUAGE) -> str:
        """The configured voice when it speaks `language` (or nothing says what it speaks),
        else the first served voice that does, of the configured voice's model first (loaded
        already), else the configured one."""
        named = self.named()
        configured = self.voice
        spoken = _language_of(configured, named)
        if not spoken or spoken.split("-")[0] == language:
            return configured
        model = named[configured].model if configured in named else configured
        speaking = [v for v in named.values() if v.language.split("-")[0] == language]
        speaking.sort(key=lambda voice: voice.model != model)  # stable: folder order otherwise
        return speaking[0].id if speaking else configured

    def aliases(self, mapped: Mapping[str, str]) -> dict[str, str]:
        """OpenAI's voice names -> the voice each speaks with (`mapped`: API__VOICES)."""
        default = self.default_voice()
        return {name: mapped.get(name, default) for name in OPENAI_VOICES}

    def resolve_voice(
        self, voice: str, model: str | None = None, mapped: Mapping[str, str] | None = None
    ) -> str:
        """The voice a synthesis request names for `voice` (and `model`, a served folder,
        when the caller chose one): an OpenAI name -> its mapped voice (or `model` itself), a
        served voice -> itself, a blend -> its canonical spelling; `VoiceNotFound` for
        anything else. With no voice announced, other names go on to the worker."""
        mapped = mapped or {}
        named = self.named()
        if voice in OPENAI_VOICES:
            if model is not None and voice not in mapped:
                return model  # the folder's own voice (a Kokoro folder: its first)
            return self.aliases(mapped)[voice]
        if not named:
            return voice
        folders = {m.id for m in self.tts_models}
        if voice in named or voice == self.voice or voice in folders:
            known = named.get(voice)
            if known is not None and model is not None and known.model != model:
                raise VoiceNotFound(
                    f"voice {voice!r} belongs to model {known.model!r}, not {model!r}: name "
                    "that model, or tts-1"
                )
            if known is None and model is not None and voice != model:
                raise VoiceNotFound(f"voice {voice!r} is not a voice of model {model!r}")
            return voice
        if is_blend(voice):
            return _resolve_blend(voice, named, model)
        raise VoiceNotFound(f"unknown voice {voice!r}: {_where_to_look(named)}")


def _language_of(name: str, named: dict[str, Voice]) -> str | None:
    if name in named:
        return named[name].language
    firsts = [v for v in named.values() if v.model == name]  # a Kokoro folder: its first voice
    return firsts[0].language if firsts else None


def _where_to_look(named: dict[str, Voice]) -> str:
    served = ", ".join(list(named)[:12]) + (", ..." if len(named) > 12 else "")
    where = (
        f"use one of {', '.join(OPENAI_VOICES)} or a served voice ({served}: GET "
        "/v1/audio/voices, `mcp-media models list`)"
    )
    blend = _blend_example(named)
    return f"{where}, or a blend of one Kokoro folder's voices such as {blend}" if blend else where


def _blend_example(named: dict[str, Voice]) -> str | None:
    """Two served voices of one Kokoro folder and one language, as a blend (None: none)."""
    seen: dict[tuple[str, str], str] = {}
    for voice in named.values():
        if voice.model == voice.id:
            continue  # a piper folder: one voice, nothing to blend
        pair = (voice.model, voice.language.split("-")[0])
        if pair in seen:
            return f"{seen[pair]}(2)+{voice.id}(1)"
        seen[pair] = voice.id
    return None


def _resolve_blend(spec: str, named: dict[str, Voice], model: str | None) -> str:
    try:
        parts = parse_blend(spec)
    except BlendError as exc:
        raise VoiceNotFound(str(exc)) from None
    voices = []
    for part in parts:
        found = named.get(part.name)
        if found is None or (model is not None and found.model != model):
            where = f" of model {model!r}" if model else ""
            raise VoiceNotFound(
                f"voice {part.name!r} in blend {spec!r} is not a served Kokoro voice{where}"
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
