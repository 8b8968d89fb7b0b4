"""The probes that prove a process can serve a capability, run once in a throwaway process
before a worker consumes anything (`workers.runtime.readiness`).

The speech-to-text probe speaks a known phrase and must hear it back. The phrase, and the
voice that speaks it, are in a language the recognizer takes: the configured voice when it
speaks one, else another prepared voice (of the configured voice's model first), else the
recognizer alone on a second of silence. An English phrase in a Chinese voice is not speech
whisper can be asked to recognise.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipelines.errors import ConfigError
from pipelines.speech.chinese_script import split_language
from workers.core.catalog import Voice
from workers.core.offers import prepared_voices
from workers.jobs.resources import Resources

# language -> (what is said, words of it that must be heard: either script for Chinese)
PHRASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "en": ("Hello, this is a test.", ("test",)),
    "zh": ("你好，这是一个测试。", ("测试", "測試")),
}


@dataclass(frozen=True, slots=True)
class ProbeSpeech:
    """What the speech-to-text probe says, and with which voice."""

    voice: str
    language: str
    phrase: str
    heard: tuple[str, ...]  # any of these in the transcript passes

    def passes(self, text: str) -> bool:
        return any(word in text.lower() for word in self.heard)


def _base(language: str) -> str:
    return split_language(language)[0] if language else ""


def probe_speech(voices: Sequence[Voice], configured: str, stt_language: str) -> ProbeSpeech | None:
    """The voice and phrase for the STT probe. `stt_language`: the language the recognizer
    is held to ("" when it detects any, "en" for an English-only model). The configured
    voice first (a voice whose folder names no language is taken as English, as before);
    then a prepared voice of the configured voice's model, English first; None when no
    prepared voice speaks a language both the recognizer and a phrase know."""
    wanted = _base(stt_language)

    def fits(language: str) -> bool:
        return language in PHRASES and (not wanted or language == wanted)

    named = {voice.id: voice for voice in reversed(voices)}  # the first of a shared name
    own = named.get(configured)
    own_language = _base(own.language) if own is not None else ""
    if fits(own_language or "en"):
        return _speech(configured, own_language or "en")
    model = own.model if own is not None else configured
    others = sorted(
        (v for v in voices if v.id != configured and fits(_base(v.language))),
        key=lambda v: (v.model != model, _base(v.language) != "en"),
    )
    return _speech(others[0].id, _base(others[0].language)) if others else None


def _speech(voice: str, language: str) -> ProbeSpeech:
    phrase, heard = PHRASES[language]
    return ProbeSpeech(voice, language, phrase, heard)


def probe_vision(resources: Resources) -> None:
    resources.vision_provider()


def probe_tts(resources: Resources) -> float:
    """Synthesise one word; the voice must produce sound. Returns the audio seconds."""
    speech = resources.synthesizer().synthesize("Ready.")
    if speech.samples is None or speech.duration_s <= 0:
        raise ConfigError("text-to-speech probe produced no audio")
    return speech.duration_s


def probe_stt(resources: Resources) -> str:
    """Recognise a spoken phrase (see `probe_speech`), else one second of silence.

    The phrase is synthesised without noise (noise scales 0): the probe must not depend on
    a random draw of the voice's sampling noise.
    """
    import numpy as np

    from pipelines.engines.registry import load_tts
    from pipelines.speech.audio import decode_audio, write_wav
    from workers.core.stage_configs import stt_config, tts_config

    settings = resources.settings
    transcriber, _ = resources.transcriber()
    rate = transcriber.sample_rate
    chosen = probe_speech(
        prepared_voices(settings), settings.tts.voice, stt_config(settings).language
    )
    try:
        if chosen is None:
            raise ConfigError("no prepared voice speaks a language the recognizer takes")
        voice = None if chosen.voice == settings.tts.voice else chosen.voice
        config = replace(tts_config(settings, voice), noise_scale=0.0, noise_scale_w=0.0)
        speech = load_tts(config).synthesize(chosen.phrase)
    except ConfigError:
        return transcriber.transcribe(np.zeros(rate, dtype=np.float32))
    assert speech.samples is not None
    with tempfile.TemporaryDirectory() as scratch:
        wav = write_wav(Path(scratch) / "probe.wav", speech.samples, speech.sample_rate)
        samples = decode_audio(wav, rate).samples
    text = transcriber.transcribe(samples)
    if not chosen.passes(text):
        raise ConfigError(
            f"speech-to-text probe heard {text!r} instead of {chosen.phrase!r} "
            f"(spoken by {chosen.voice})"
        )
    return text
