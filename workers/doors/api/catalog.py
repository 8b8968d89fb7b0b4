"""What the API offers: the STT model, the TTS models and voices, OpenAI's names for them.

Read from the model folders (ONNX metadata and small JSON files, never a loaded model); the
voices by name are `workers.core.voices`, shared with the MCP and CLI doors.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pipelines.onnx_metadata import read_onnx_metadata
from pipelines.speech.layout import is_multilingual
from workers.core.settings import Settings
from workers.core.stage_configs import stt_config
from workers.core.voices import (
    OPENAI_VOICES,
    Voice,
    VoiceNotFound,
    aliases,
    prepared_voices,
    tts_folders,
)
from workers.core.voices import resolve_voice as resolve
from workers.doors.api.errors import ApiError

__all__ = ["OPENAI_VOICES", "aliases", "resolve_voice", "voices"]

TTS_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STT_ALIAS = "whisper-1"


@dataclass(frozen=True, slots=True)
class SttModel:
    id: str
    multilingual: bool
    word_timestamps: bool = False  # its export carries the alignment that times words


@functools.lru_cache(maxsize=8)
def _word_timestamps(model_dir: Path) -> bool:
    """Whether the export carries the alignment that times words (native whisper only)."""
    for name in ("encoder.int8.onnx", "encoder.onnx"):
        if (model_dir / name).is_file():
            try:
                return "alignment_heads" in read_onnx_metadata(model_dir / name)
            except Exception:  # unreadable: the worker's probe says why
                return False
    return False


def stt_model(settings: Settings) -> SttModel:
    model_dir = stt_config(settings).model_dir
    return SttModel(model_dir.name, is_multilingual(model_dir), _word_timestamps(model_dir))


def voices(settings: Settings) -> list[Voice]:
    """Every prepared voice by its own name, the configured one first."""
    found = prepared_voices(settings)
    default = settings.tts.voice
    first = [v for v in found if v.id == default]
    return [*first, *(v for v in found if v.id != default)]


def tts_models(settings: Settings) -> list[str]:
    """OpenAI's TTS model names, then each prepared TTS folder."""
    return [*TTS_MODELS, *tts_folders(settings)]


def resolve_voice(settings: Settings, voice: str, model: str | None = None) -> str:
    """`workers.core.voices.resolve_voice`, an unknown voice a 400 `unknown_voice`."""
    try:
        return resolve(settings, voice, model)
    except VoiceNotFound as exc:
        raise ApiError(400, str(exc), param="voice", code="unknown_voice") from None


def model_ids(settings: Settings) -> list[str]:
    return [STT_ALIAS, stt_model(settings).id, *tts_models(settings)]
