"""The one place stages meet their engines: each builder validates what it is given, then
imports its engine when called, in the worker process that runs it (after fork), never at
import. Vision providers, the whisper recognizer, the silero VAD, piper and Kokoro voices.

Stage modules own their ports (Protocols and errors) and never import an engine; whoever
runs a stage asks this registry for the engine behind the port.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pipelines.digest import Extractor
from pipelines.errors import ConfigError, Skipped
from pipelines.speech.blend import is_blend
from pipelines.speech.chinese_script import AS_IS, check_script
from pipelines.speech.chunks import KOKORO_FIRST_WORDS
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.layout import Engine, choose_engine, detect_stt, detect_tts
from pipelines.speech.stt import WHISPER_RATE, Transcriber
from pipelines.speech.stt import validate_model_dir as validate_whisper_dir
from pipelines.speech.tts import (
    Phonemizer,
    TextToSpeech,
    Voices,
    is_kokoro_dir,
    validate_kokoro_dir,
)
from pipelines.speech.tts import validate_model_dir as validate_voice_dir
from pipelines.speech.vad import SpeechDetector, VadConfig, validate_vad_model
from pipelines.vision import LocalVisionProvider, ProviderKind, VisionConfig, VisionProvider


def vision_provider(config: VisionConfig) -> VisionProvider:
    """The provider `config` asks for."""
    match config.provider:
        case ProviderKind.NONE:
            raise Skipped("vision provider is 'none'")
        case ProviderKind.LOCAL:
            from pipelines.engines.ocr import RapidOcrReader

            return LocalVisionProvider(RapidOcrReader())
        case ProviderKind.OPENAI:
            from pipelines.engines.openai_vision import OpenAIVisionProvider

            return OpenAIVisionProvider(config)
    raise ConfigError(f"unknown vision provider {config.provider!r}")  # pragma: no cover


def load_transcriber(config: SttConfig) -> Transcriber:
    """Validate then load (about 0.3 s and 150 MB for tiny.en int8). Once per process.

    The engine is the config's (`auto`: by the folder's layout, `layout.detect_stt`);
    sherpa-onnx on our whisper export makes its sherpa-layout copy the first time."""
    from pipelines.engines.whisper import OrtWhisper

    layout = detect_stt(config.model_dir)
    if choose_engine(config.engine, layout) is Engine.SHERPA:
        from pipelines.engines import sherpa_loader

        if layout.native:  # our per-layer whisper: sherpa-onnx reads a copy in its layout
            from pipelines.engines.sherpa_whisper import layout_copy

            layout = detect_stt(layout_copy(config.model_dir))
        return sherpa_loader.load_transcriber(config, layout)
    files = validate_whisper_dir(config.model_dir, config.language)
    if config.task not in ("transcribe", "translate"):
        raise ConfigError(f"unknown whisper task {config.task!r}: transcribe or translate")
    if config.task == "translate" and not files.multilingual:
        raise ConfigError(f"{config.model_dir.name} is English-only: it cannot translate")
    return OrtWhisper(
        files.encoder,
        files.decoder,
        files.tokens,
        files.mel_filters,
        config.threads,
        config.language if files.multilingual else "en",
        task=config.task,
        tail_padding_s=config.tail_padding_s,
    )


def chinese_writer(script: str) -> Callable[[str], str] | None:
    """Writes Mandarin text in `script` (None: as-is); OpenCC loads on the first Chinese
    text, so English-only transcription never needs it."""
    if check_script(script) == AS_IS:
        return None

    def write(text: str) -> str:
        from pipelines.engines.chinese_script import script_converter

        convert = script_converter(script)
        return convert(text) if convert is not None else text

    return write


def load_vad(config: SttConfig) -> SpeechDetector | None:
    """The detector for long audio (stateful: one per process, like the recognizer)."""
    if config.vad_model is None:
        return None
    if choose_engine(config.engine, detect_stt(config.model_dir)) is Engine.SHERPA:
        from pipelines.engines import sherpa_loader

        return sherpa_loader.load_vad(VadConfig(config.vad_model))
    return load_detector(VadConfig(config.vad_model), WHISPER_RATE)


def load_detector(config: VadConfig, sample_rate: int = 16_000) -> SpeechDetector:
    from pipelines.engines.silero import RATE, SileroVad

    if sample_rate != RATE:
        raise ConfigError(f"the silero VAD runs at {RATE} Hz, not {sample_rate} Hz")
    return SileroVad(
        validate_vad_model(config.model),
        threshold=config.threshold,
        min_silence_s=config.min_silence_s,
        min_speech_s=config.min_speech_s,
        max_speech_s=config.max_speech_s,
        pad_s=config.pad_s,
        threads=config.threads,
    )


def load_tts(config: TtsConfig, phonemizer: Phonemizer | None = None) -> TextToSpeech:
    """Validate, then load the voice (1-2 s, ~130 MB). Default phonemizer: espeak-ng.

    Both run on onnxruntime directly: piper voices in `engines.vits`, Kokoro in `engines.kokoro`.
    """
    from pipelines.engines.vits import OrtVits

    layout = detect_tts(config.model_dir)
    if choose_engine(config.engine, layout) is Engine.SHERPA:
        from pipelines.engines import sherpa_loader

        return sherpa_loader.load_tts(config, layout, kokoro_phonemizer, phonemizer)
    if is_kokoro_dir(config.model_dir):
        return _load_kokoro(config, phonemizer)

    files = validate_voice_dir(config.model_dir, config.voice, config.speaker_id)
    if phonemizer is None:
        from pipelines.engines.phonemizer import EspeakPhonemizer

        phonemizer = EspeakPhonemizer(files.voice)
    synthesizer = OrtVits(
        files.model,
        files.tokens,
        files.sample_rate,
        threads=config.threads,
        noise_scale=config.noise_scale,
        noise_scale_w=config.noise_scale_w,
        n_speakers=files.n_speakers,
    )
    return TextToSpeech(synthesizer, phonemizer, config)


def _load_kokoro(config: TtsConfig, phonemizer: Phonemizer | None) -> TextToSpeech:
    from pipelines.engines.kokoro import OrtKokoro

    files = validate_kokoro_dir(config.model_dir)
    names = {v.name for v in files.catalogue}
    blend = config.voice if is_blend(config.voice) and config.voice not in names else ""
    chosen = files.voice(config.voice) if config.voice and not blend else files.catalogue[0]
    voices = Voices(files, kokoro_phonemizer)
    synthesizer = OrtKokoro(
        files.model,
        files.voices,
        files.tokens,
        files.sample_rate,
        files.n_speakers,
        files.style_dim,
        threads=config.threads,
    )
    first = KOKORO_FIRST_WORDS if config.first_chunk_words is None else config.first_chunk_words
    config = replace(
        config,
        voice=chosen.name,
        speaker_id=chosen.speaker_id,
        language=chosen.language,
        first_chunk_words=first,
    )
    tts = TextToSpeech(
        synthesizer, phonemizer or voices.phonemizer(chosen.language), config, voices
    )
    return tts.for_voice(blend) if blend else tts


def kokoro_phonemizer(vocabulary: list[str], language: str) -> Phonemizer:
    """Kokoro's phonemizer for a language: misaki's Mandarin, else espeak-ng's."""
    from pipelines.engines.kokoro_phonemes import KokoroChinese, KokoroEnglish

    if language.startswith("zh"):
        return KokoroChinese(vocabulary)
    return KokoroEnglish(vocabulary, language)


def document_extractor() -> Extractor:
    """The PDF extractor (PDFium in long-lived capped child processes, one per slot)."""
    from pipelines.engines.reader import DocumentReader

    return DocumentReader()
