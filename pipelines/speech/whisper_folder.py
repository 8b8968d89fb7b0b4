"""A whisper folder of `mcp-media models prepare`, checked the way the engine reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.errors import ConfigError

# Encoder metadata the whisper engine reads (sherpa-onnx's key names).
_WHISPER_KEYS = (
    *("n_mels", "n_text_layer", "n_text_ctx", "n_text_state", "n_vocab", "sot", "eot"),
    *("blank_id", "translate", "transcribe", "is_multilingual", "no_timestamps", "no_speech"),
)


@dataclass(frozen=True, slots=True)
class WhisperFiles:
    encoder: Path
    decoder: Path
    tokens: Path
    mel_filters: Path
    multilingual: bool


def _pick(model_dir: Path, *names: str) -> Path:
    for name in names:
        if (model_dir / name).is_file():
            return model_dir / name
    raise ConfigError(f"whisper model folder {model_dir} has no {' or '.join(names)}")


def validate_model_dir(model_dir: Path, language: str = "en") -> WhisperFiles:
    """Check a whisper folder the way the engine will read it, without loading it."""
    from pipelines.onnx_metadata import read_onnx_metadata

    if not model_dir.is_dir():
        raise ConfigError(f"whisper model folder not found: {model_dir}")
    encoder = _pick(model_dir, "encoder.int8.onnx", "encoder.onnx")
    decoder = _pick(model_dir, "decoder.int8.onnx", "decoder.onnx")
    tokens = _pick(model_dir, "tokens.txt")
    meta = read_onnx_metadata(encoder)
    missing = [key for key in [*_WHISPER_KEYS, "sot_sequence"] if key not in meta]
    if missing:
        raise ConfigError(
            f"{encoder} lacks whisper metadata {', '.join(missing)}: re-export the model"
            " (mcp-media models prepare)"
        )
    bad = [key for key in _WHISPER_KEYS if not meta[key].lstrip("-").isdigit()]
    if bad or not all(p.strip().isdigit() for p in meta["sot_sequence"].split(",")):
        raise ConfigError(f"{encoder} has malformed whisper metadata: {bad or 'sot_sequence'}")
    multilingual = meta["is_multilingual"] != "0"
    if multilingual and not {"all_language_tokens", "all_language_codes"} <= meta.keys():
        raise ConfigError(f"{encoder} is multilingual but lacks its language tables")
    if not multilingual and language not in ("en", ""):
        raise ConfigError(
            f"{model_dir.name} transcribes English only, not {language!r}: choose a"
            " multilingual model (whisper-base: mcp-media models prepare --tier quality)"
        )
    if not (model_dir / "mel_filters.npy").is_file():
        raise ConfigError(
            f"whisper model folder {model_dir} has no mel_filters.npy: not a folder of"
            " `mcp-media models prepare` (sherpa-onnx's whisper layout is not loaded);"
            " convert the weights with workers/provisioning/whisper_export.py"
        )
    read_onnx_metadata(decoder)  # at least a readable ONNX file
    if tokens.stat().st_size == 0:
        raise ConfigError(f"{tokens} is empty")
    return WhisperFiles(encoder, decoder, tokens, model_dir / "mel_filters.npy", multilingual)
