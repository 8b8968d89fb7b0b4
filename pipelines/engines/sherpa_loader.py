"""Builds the sherpa-onnx engines for a folder the layout detector read (the registry's
sherpa-onnx branch): a recognizer with sherpa's own silero VAD, or a voice with the
phonemizer it needs. Folders are checked before sherpa-onnx sees them."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from pipelines.errors import ConfigError, Unsupported
from pipelines.onnx_metadata import read_onnx_metadata
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.layout import Layout
from pipelines.speech.stt import Transcriber
from pipelines.speech.tts import (
    KokoroFiles,
    KokoroVoice,
    Phonemizer,
    TextToSpeech,
    Voices,
    validate_kokoro_dir,
)
from pipelines.speech.vad import SpeechDetector, VadConfig

# Kokoro's voice names start with their language: a(merican), b(ritish), z(h), ...
_KOKORO_LANGUAGES = {
    "a": "en-us", "b": "en-gb", "z": "zh", "e": "es", "f": "fr-fr", "h": "hi", "i": "it",
    "j": "ja", "p": "pt-br",
}  # fmt: skip


def _readable(layout: Layout) -> None:
    """Every file the layout names is a readable ONNX / text file (sherpa-onnx exits the
    process on one it cannot read)."""
    for role, path in layout.files.items():
        if path.suffix == ".onnx":
            read_onnx_metadata(path)
        elif path.is_file() and path.stat().st_size == 0:
            raise ConfigError(f"{path} ({role}) is empty")


def load_transcriber(config: SttConfig, layout: Layout) -> Transcriber:
    from pipelines.engines.sherpa import SherpaRecognizer

    _readable(layout)
    if config.task not in ("transcribe", "translate"):
        raise ConfigError(f"unknown task {config.task!r}: transcribe or translate")
    if config.task == "translate" and layout.family != "whisper":
        raise ConfigError(f"a {layout.family} model cannot translate: only whisper does")
    if layout.family == "whisper":
        _whisper_metadata(Path(layout.file("encoder")))
    return SherpaRecognizer(layout, config.threads, config.language, config.task)


# What sherpa-onnx reads from a whisper encoder (a missing key ends the process there).
_WHISPER_KEYS = (
    *("n_mels", "n_text_layer", "n_text_ctx", "n_text_state", "n_vocab", "sot", "eot"),
    *("blank_id", "translate", "transcribe", "is_multilingual", "no_timestamps", "no_speech"),
    "sot_sequence",
)


def _whisper_metadata(encoder: Path) -> None:
    meta = read_onnx_metadata(encoder)
    missing = [key for key in _WHISPER_KEYS if key not in meta]
    if meta.get("is_multilingual", "0") != "0":
        missing += [k for k in ("all_language_tokens", "all_language_codes") if k not in meta]
    if missing:
        raise ConfigError(
            f"{encoder} lacks the whisper metadata sherpa-onnx reads: {', '.join(missing)}"
            " (export it with sherpa-onnx's scripts/whisper/export-onnx.py)"
        )


def load_vad(config: VadConfig) -> SpeechDetector:
    """sherpa-onnx's silero detector: it runs silero's streaming export, one window a call."""
    from pipelines.engines.sherpa import SherpaSileroVad

    model = config.model / "silero_vad.onnx" if config.model.is_dir() else config.model
    if not model.is_file():
        raise ConfigError(f"sherpa-onnx's VAD needs silero_vad.onnx: {model} not found")
    read_onnx_metadata(model)
    return SherpaSileroVad(
        model,
        threshold=config.threshold,
        min_silence_s=config.min_silence_s,
        min_speech_s=config.min_speech_s,
        max_speech_s=config.max_speech_s,
        threads=config.threads,
    )


class _AsText:
    """The phonemizer of a voice with a lexicon: sherpa-onnx reads the text itself."""

    def phonemize(self, text: str) -> list[str]:
        return [text] if text.strip() else []


def _espeak_voice(layout: Layout, meta: dict[str, str], given: str) -> str:
    if given:
        return given
    model = Path(layout.file("model") or layout.file("acoustic_model"))
    for candidate in (model.with_name(model.name + ".json"), model.parent / "model.onnx.json"):
        try:
            voice = json.loads(candidate.read_text(encoding="utf-8"))["espeak"]["voice"]
            return str(voice)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return meta.get("voice", "") or "en-us"


def load_tts(
    config: TtsConfig,
    layout: Layout,
    kokoro_phonemizer: Callable[[list[str], str], Phonemizer],
    phonemizer: Phonemizer | None = None,
) -> TextToSpeech:
    from pipelines.engines.sherpa import SherpaTts

    _readable(layout)
    main = Path(layout.file("model") or layout.file("acoustic_model"))
    meta = read_onnx_metadata(main)
    if layout.family == "kokoro":
        return _kokoro(config, layout, kokoro_phonemizer, phonemizer)
    text_input = "lexicon" in layout.files and "data_dir" not in layout.files
    synthesizer = SherpaTts(
        layout, config.threads, config.noise_scale, config.noise_scale_w, text_input=text_input
    )
    if phonemizer is None:
        if text_input:
            phonemizer = _AsText()
        else:
            from pipelines.engines.phonemizer import EspeakPhonemizer

            phonemizer = EspeakPhonemizer(_espeak_voice(layout, meta, config.voice))
    spoken = meta.get("language", "").lower()
    language = "zh" if "zh" in spoken or "chinese" in spoken else config.language
    return TextToSpeech(synthesizer, phonemizer, replace(config, language=language))


def _kokoro(
    config: TtsConfig,
    layout: Layout,
    make_phonemizer: Callable[[list[str], str], Phonemizer],
    phonemizer: Phonemizer | None,
) -> TextToSpeech:
    from pipelines.engines.sherpa import SherpaTts

    folder = Path(layout.file("voices")).parent
    files = validate_kokoro_dir(folder) if (folder / "voices.json").is_file() else _files(layout)
    chosen = files.voice(config.voice) if config.voice else files.catalogue[0]
    synthesizer = _NoBlends(SherpaTts(layout, config.threads))
    config = replace(
        config, voice=chosen.name, speaker_id=chosen.speaker_id, language=chosen.language
    )
    voices = Voices(files, make_phonemizer)
    return TextToSpeech(
        synthesizer, phonemizer or voices.phonemizer(chosen.language), config, voices
    )


def _files(layout: Layout) -> KokoroFiles:
    """A sherpa-onnx Kokoro release folder (no voices.json): its voices from the model's
    ``speaker_names`` metadata, their languages from Kokoro's name prefixes."""
    model = Path(layout.file("model"))
    meta = read_onnx_metadata(model)
    try:
        n_speakers = int(meta.get("n_speakers", "0"))
        dims = tuple(int(d) for d in meta.get("style_dim", "510,1,256").split(","))
        rate = int(meta.get("sample_rate", "24000"))
    except ValueError:
        raise ConfigError(f"{model} has malformed Kokoro metadata") from None
    names = [n.strip() for n in meta.get("speaker_names", "").split(",") if n.strip()]
    names = names or [f"speaker-{i}" for i in range(n_speakers)]
    if not names or len(dims) != 3:
        raise ConfigError(f"{model} lacks Kokoro metadata n_speakers/style_dim")
    catalogue = tuple(
        KokoroVoice(name, _KOKORO_LANGUAGES.get(name[:1], "en-us"), index)
        for index, name in enumerate(names)
    )
    voices = Path(layout.file("voices"))
    return KokoroFiles(
        model, voices, Path(layout.file("tokens")), catalogue, rate, len(names),
        (dims[0], dims[1], dims[2]),
    )  # fmt: skip


class _NoBlends:
    """sherpa-onnx speaks one Kokoro voice at a time: a blend is refused, not ignored."""

    def __init__(self, inner: object) -> None:
        from pipelines.engines.sherpa import SherpaTts

        assert isinstance(inner, SherpaTts)
        self._inner = inner
        self.sample_rate = inner.sample_rate

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> np.typing.NDArray[np.float32]:
        return self._inner.synthesize(phonemes, speaker_id, speed)

    def synthesize_mix(
        self, phonemes: Sequence[str], mix: Sequence[tuple[int, float]], speed: float = 1.0
    ) -> np.typing.NDArray[np.float32]:
        raise Unsupported(
            "voice blends need the native Kokoro engine (MCP_MEDIA_TTS__ENGINE=native or"
            " auto); sherpa-onnx speaks one voice at a time"
        )
