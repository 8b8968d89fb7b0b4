"""What this node can serve, read from its model folders' small JSON files and ONNX
metadata (never a loaded model): the offers a worker announces with its versions
(`workers.runtime.heartbeat`), which every door reads as a `workers.core.catalog.Catalog`.
The in-process gateway reads them for itself. Doors never call this module."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pipelines.onnx_metadata import read_onnx_metadata
from pipelines.speech.layout import engine_or_default, is_multilingual
from workers.core.catalog import Voice
from workers.core.settings import Settings


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


@functools.lru_cache(maxsize=8)
def _word_timestamps(model_dir: Path) -> bool:
    """Whether the export carries the alignment that times words (our whisper export only)."""
    for name in ("encoder.int8.onnx", "encoder.onnx"):
        if (model_dir / name).is_file():
            try:
                return "alignment_heads" in read_onnx_metadata(model_dir / name)
            except Exception:  # unreadable: the worker's probe says why
                return False
    return False


def tts_offer(settings: Settings) -> dict[str, Any]:
    """What a TTS worker serves: its configured voice, every prepared voice by name (the
    configured one first) and each model folder with the engine that runs it."""
    found = prepared_voices(settings)
    first = [v for v in found if v.id == settings.tts.voice]
    voices = [*first, *(v for v in found if v.id != settings.tts.voice)]
    root = settings.models_root
    models = [
        {"id": name, "engine": engine_or_default(settings.tts.engine, root / name, "tts")}
        for name in tts_folders(settings)
    ]
    return {"voice": settings.tts.voice, "voices": [v.to_json() for v in voices], "models": models}


def stt_offer(settings: Settings, model_dir: Path) -> dict[str, Any]:
    """What an STT worker serves: its model folder, whether it takes other languages than
    English and can time words, and the engine that runs it."""
    return {
        "model": model_dir.name,
        "multilingual": is_multilingual(model_dir),
        "word_timestamps": _word_timestamps(model_dir),
        "engine": engine_or_default(settings.stt.engine, model_dir, "stt"),
    }
