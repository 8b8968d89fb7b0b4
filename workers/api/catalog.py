"""What the API offers: the STT model, the TTS models and voices, OpenAI's names for them.

Read from the model folders (ONNX metadata, never a loaded model), once per folder.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pipelines.onnx_metadata import read_onnx_metadata
from workers.api.errors import ApiError
from workers.configs import stt_config
from workers.settings import Settings

# OpenAI's voices; each maps to a prepared voice (MCP_MEDIA_API__VOICES, else the default).
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse",
)  # fmt: skip
TTS_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STT_ALIAS = "whisper-1"


@dataclass(frozen=True, slots=True)
class SttModel:
    id: str
    multilingual: bool


@functools.lru_cache(maxsize=8)
def _multilingual(model_dir: Path) -> bool:
    for name in ("encoder.int8.onnx", "encoder.onnx"):
        if (model_dir / name).is_file():
            try:
                return read_onnx_metadata(model_dir / name).get("is_multilingual", "0") != "0"
            except Exception:  # unreadable: the worker's probe says why
                return False
    return False


def stt_model(settings: Settings) -> SttModel:
    model_dir = stt_config(settings).model_dir
    return SttModel(model_dir.name, _multilingual(model_dir))


def voices(settings: Settings) -> list[str]:
    """Prepared voice folders (a piper model and its tokens), the configured one first."""
    root = settings.models_root
    found = []
    try:
        for folder in sorted(root.iterdir()):
            if (folder / "model.onnx").is_file() and (folder / "tokens.txt").is_file():
                found.append(folder.name)
    except OSError:
        pass
    default = settings.tts.voice
    return [default, *(name for name in found if name != default)]


def aliases(settings: Settings) -> dict[str, str]:
    given = settings.api.voices
    return {name: given.get(name, settings.tts.voice) for name in OPENAI_VOICES}


def resolve_voice(settings: Settings, voice: str) -> str:
    """An OpenAI voice name or a prepared voice folder -> the folder; 400 for anything else."""
    if voice in OPENAI_VOICES:
        return aliases(settings)[voice]
    if voice in voices(settings):
        return voice
    raise ApiError(
        400,
        f"unknown voice {voice!r}: use one of {', '.join(OPENAI_VOICES)} or a prepared voice "
        "(GET /v1/audio/voices)",
        param="voice",
        code="unknown_voice",
    )


def model_ids(settings: Settings) -> list[str]:
    return [STT_ALIAS, stt_model(settings).id, *TTS_MODELS, *voices(settings)]
