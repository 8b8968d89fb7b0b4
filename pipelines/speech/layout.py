"""Which engine runs a model folder, told from its file names alone (nothing is loaded).

Two layouts exist. Ours (`models prepare`): whisper with ``mel_filters.npy`` beside its
per-layer encoder/decoder, piper voices with ``model.onnx.json``, Kokoro with
``voices.json``; the native onnxruntime engines run them. sherpa-onnx's, as its release
folders name their files: whisper ``*-encoder*.onnx`` + ``*-decoder*.onnx`` + ``*-tokens.txt``,
SenseVoice / Paraformer ``model[.int8].onnx`` + ``tokens.txt``, zipformer transducers
``encoder* decoder* joiner*``, Moonshine ``preprocess encode uncached_decode cached_decode``;
VITS/piper ``*.onnx`` + ``tokens.txt`` (+ ``espeak-ng-data`` or ``lexicon.txt``), Matcha an
acoustic model + a vocoder, Kokoro ``model.onnx`` + ``voices.bin``. `auto` picks native for
ours and sherpa-onnx for everything else; a folder neither fits is refused naming what is
missing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pipelines.errors import ConfigError, ModelMissing

log = logging.getLogger("mcp_media.speech")
PREPARE = "run `mcp-media models prepare` (or `make models`) where the jobs run"


class Engine(StrEnum):
    AUTO = "auto"
    NATIVE = "native"
    SHERPA = "sherpa-onnx"


ENGINES = tuple(e.value for e in Engine)


@dataclass(frozen=True, slots=True)
class Layout:
    """A model folder as an engine reads it: its family and the files that play each role."""

    family: str  # whisper, sense_voice, paraformer, transducer, moonshine, vits, matcha, kokoro
    native: bool  # our own layout (`models prepare`); else sherpa-onnx's
    files: dict[str, Path] = field(default_factory=dict)

    def file(self, role: str) -> str:
        found = self.files.get(role)
        return str(found) if found is not None else ""


def _onnx(folder: Path, *patterns: str) -> Path | None:
    """The first ``.onnx`` file matching a pattern, the int8 one preferred (sherpa's
    release folders ship both)."""
    for pattern in patterns:
        found = sorted(p for p in folder.glob(pattern) if p.is_file())
        if found:
            int8 = [p for p in found if ".int8." in p.name]
            return (int8 or found)[0]
    return None


def _tokens(folder: Path) -> Path | None:
    for pattern in ("tokens.txt", "*-tokens.txt", "*tokens*.txt"):
        found = sorted(p for p in folder.glob(pattern) if p.is_file())
        if found:
            return found[0]
    return None


def _need(folder: Path, family: str, files: dict[str, Path | None]) -> dict[str, Path]:
    missing = [role for role, path in files.items() if path is None]
    if missing:
        raise ConfigError(
            f"{folder} looks like a sherpa-onnx {family} folder but has no"
            f" {', '.join(missing)} file"
        )
    return {role: path for role, path in files.items() if path is not None}


def missing_model(folder: Path, what: str) -> ModelMissing:
    """The error of a model folder that is not there: its path in the log, not the text."""
    log.warning("no %s model: folder %s not found", what, folder)
    return ModelMissing(f"no {what} model prepared ({folder.name}); {PREPARE}")


def _folder(folder: Path, what: str) -> None:
    if not folder.is_dir():
        raise missing_model(folder, what)


def detect_stt(folder: Path) -> Layout:
    """The recognizer layout of `folder`; ConfigError naming what a folder lacks
    (ModelMissing when it is not there)."""
    _folder(folder, "speech-to-text")
    tokens = _tokens(folder)
    if (folder / "mel_filters.npy").is_file():
        return Layout("whisper", True)
    if _onnx(folder, "preprocess*.onnx"):
        files = {
            "preprocessor": _onnx(folder, "preprocess*.onnx"),
            "encoder": _onnx(folder, "encode*.onnx"),
            "uncached_decoder": _onnx(folder, "uncached_decode*.onnx"),
            "cached_decoder": _onnx(folder, "cached_decode*.onnx"),
            "tokens": tokens,
        }
        return Layout("moonshine", False, _need(folder, "Moonshine", files))
    if _onnx(folder, "*joiner*.onnx"):
        files = {
            "encoder": _onnx(folder, "*encoder*.onnx"),
            "decoder": _onnx(folder, "*decoder*.onnx"),
            "joiner": _onnx(folder, "*joiner*.onnx"),
            "tokens": tokens,
        }
        return Layout("transducer", False, _need(folder, "transducer", files))
    if _onnx(folder, "*encoder*.onnx") or _onnx(folder, "*decoder*.onnx"):
        files = {
            "encoder": _onnx(folder, "*encoder*.onnx"),
            "decoder": _onnx(folder, "*decoder*.onnx"),
            "tokens": tokens,
        }
        return Layout("whisper", False, _need(folder, "whisper", files))
    model = _onnx(folder, "model*.onnx")
    if model is not None:
        family = _sense_or_paraformer(folder, model)
        return Layout(family, False, _need(folder, family, {"model": model, "tokens": tokens}))
    raise ConfigError(
        f"{folder} is no speech recognizer folder: expected mel_filters.npy with"
        " encoder/decoder (mcp-media's whisper), or sherpa-onnx's files: *-encoder.onnx +"
        " *-decoder.onnx + *-tokens.txt (whisper), model.onnx + tokens.txt (SenseVoice,"
        " Paraformer), encoder/decoder/joiner (transducer) or preprocess/encode/"
        "uncached_decode/cached_decode (Moonshine)"
    )


def _sense_or_paraformer(folder: Path, model: Path) -> str:
    """Both ship ``model.onnx`` + ``tokens.txt``: told apart by the release folder's name,
    else by the model's metadata (SenseVoice's carries its language table)."""
    name = folder.name.lower()
    if "sense" in name:
        return "sense_voice"
    if "paraformer" in name:
        return "paraformer"
    from pipelines.onnx_metadata import read_onnx_metadata

    try:
        meta = read_onnx_metadata(model)
    except ConfigError:
        meta = {}
    if "lang_zh" in meta or "with_itn" in meta or meta.get("model_type") == "sense_voice":
        return "sense_voice"
    if meta.get("model_type", "").startswith("paraformer") or "lfr_window_size" in meta:
        return "paraformer"
    raise ConfigError(
        f"{folder}: a model.onnx + tokens.txt folder, but neither its name nor its metadata"
        " says SenseVoice or Paraformer: keep the release folder's name"
        " (sherpa-onnx-sense-voice-... or sherpa-onnx-paraformer-...)"
    )


def detect_tts(folder: Path) -> Layout:
    """The voice layout of `folder`; ConfigError naming what a folder lacks (ModelMissing
    when it is not there)."""
    _folder(folder, "text-to-speech")
    tokens = _tokens(folder)
    espeak = folder / "espeak-ng-data"
    lexicon = sorted(folder.glob("lexicon*.txt"))
    extra: dict[str, Path] = {}
    if espeak.is_dir():
        extra["data_dir"] = espeak
    if lexicon:
        extra["lexicon"] = lexicon[0]
    if (folder / "dict").is_dir():
        extra["dict_dir"] = folder / "dict"
    if (folder / "voices.bin").is_file():
        native = (folder / "voices.json").is_file() and not espeak.is_dir()
        files = {"model": _onnx(folder, "model.onnx", "model*.onnx"), "tokens": tokens}
        return Layout(
            "kokoro", native, {**_need(folder, "Kokoro", files), **extra,
                               "voices": folder / "voices.bin"}
        )  # fmt: skip
    vocoder = _onnx(folder, "*vocos*.onnx", "*hifigan*.onnx", "vocoder*.onnx")
    acoustic = _onnx(folder, "model-steps-*.onnx", "*acoustic*.onnx")
    if vocoder is not None or acoustic is not None:
        files = {"acoustic_model": acoustic, "vocoder": vocoder, "tokens": tokens}
        return Layout("matcha", False, {**_need(folder, "Matcha", files), **extra})
    json_voice = sorted(folder.glob("*.onnx.json"))
    if (folder / "model.onnx.json").is_file() and (folder / "model.onnx").is_file():
        files = {"model": folder / "model.onnx", "tokens": tokens}
        return Layout("vits", not espeak.is_dir(), {**_need(folder, "piper", files), **extra})
    model = _onnx(folder, "model.onnx", "*.onnx")
    if model is None or not (json_voice or extra):
        raise ConfigError(
            f"{folder} is no voice folder: expected a piper voice (model.onnx +"
            " model.onnx.json + tokens.txt), a Kokoro folder (model.onnx + voices.bin +"
            " tokens.txt) or sherpa-onnx's files: *.onnx + tokens.txt + espeak-ng-data or"
            " lexicon.txt (VITS/piper), an acoustic model + vocoder (Matcha)"
        )
    files = {"model": model, "tokens": tokens}
    return Layout("vits", False, {**_need(folder, "VITS", files), **extra})


def is_multilingual(folder: Path) -> bool:
    """Whether a recognizer folder hears more than English: a whisper's encoder metadata
    says; the other families take no language or detect it themselves (True). A folder
    that cannot be read counts as English-only."""
    if not folder.is_dir():  # not prepared (yet): asked, not used, so nothing is logged
        return False
    try:
        layout = detect_stt(folder)
    except ConfigError:
        return False
    if layout.family != "whisper":
        return True
    from pipelines.onnx_metadata import read_onnx_metadata

    encoder = layout.files.get("encoder")
    if encoder is None:  # ours: the folder's encoder.int8.onnx or encoder.onnx
        found = [
            folder / n for n in ("encoder.int8.onnx", "encoder.onnx") if (folder / n).is_file()
        ]
        encoder = found[0] if found else None
    try:
        meta = read_onnx_metadata(encoder) if encoder is not None else {}
    except ConfigError:
        return False
    return meta.get("is_multilingual", "0") != "0"


def choose_engine(requested: str, layout: Layout) -> Engine:
    """The engine for a folder: `auto` by its layout; a forced engine the folder does not
    fit is refused with why. sherpa-onnx on our whisper export runs a sherpa-layout copy
    of it (`engines.sherpa_whisper`, made by the registry when first loaded)."""
    try:
        engine = Engine(requested)
    except ValueError:
        raise ConfigError(f"unknown speech engine {requested!r}: {', '.join(ENGINES)}") from None
    if engine is Engine.AUTO:
        return Engine.NATIVE if layout.native else Engine.SHERPA
    if engine is Engine.NATIVE and not layout.native:
        raise ConfigError(
            f"this {layout.family} folder is in sherpa-onnx's layout, which the native"
            " engines do not read: set the engine to sherpa-onnx or auto"
        )
    return engine


def stt_engine(requested: str, folder: Path) -> Engine:
    return choose_engine(requested, detect_stt(folder))


def tts_engine(requested: str, folder: Path) -> Engine:
    return choose_engine(requested, detect_tts(folder))


def engine_or_default(requested: str, folder: Path, kind: str) -> str:
    """The engine name for keys and listings without raising: a folder not there yet (or
    not readable) counts as native, so versions stay computable on a client without it."""
    if not folder.is_dir():  # not prepared (yet): asked, not used, so nothing is logged
        return Engine.NATIVE.value
    try:
        detect = detect_stt if kind == "stt" else detect_tts
        return choose_engine(requested, detect(folder)).value
    except ConfigError:
        return Engine.NATIVE.value
