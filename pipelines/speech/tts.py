"""Text to speech: text -> normalised sentences -> phonemes -> a piper (VITS) or Kokoro voice.

A Kokoro folder holds several voices (``voices.json``: name, language, speaker id) on one
model; `TextToSpeech.for_voice` switches voice per request without loading anything again.
Chinese voices get Chinese text rules (`text_zh`), the others the English ones.

Sentences are synthesised one at a time, so `TextToSpeech.stream` hands out the first
sentence's audio while the rest is still to come, and memory follows one sentence; the first
sentence's opening words go alone (`chunks`), so the first audio waits for a few words' work.
Audio that comes out empty or silent is an error, never a result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pipelines.errors import ConfigError, PermanentError, Stopped
from pipelines.outcomes import Outcome
from pipelines.speech.blend import BlendError, Mix, is_blend, mix, parse_blend
from pipelines.speech.chunks import Chunk, plan
from pipelines.speech.config import TtsConfig
from pipelines.speech.encode import SpeechFile
from pipelines.speech.text import prepare
from pipelines.speech.text_zh import prepare_zh

Samples = NDArray[np.float32]

# The piper metadata a voice folder must carry (the voice's rate and speakers come from here).
_VITS_KEYS = ("sample_rate", "n_speakers", "language", "comment")
_KOKORO_KEYS = ("model_type", "sample_rate", "n_speakers", "has_espeak", "style_dim")
_SILENT_PEAK = 0.02  # speech from these voices peaks near 0.5; unknown phonemes near 0.01
_QUIET = 0.01  # below this a sample at the edge of a piece is the voice's own silence
_JOIN_KEEP_S = 0.1  # silence kept on each side where a sentence was cut in two pieces


class Phonemizer(Protocol):
    def phonemize(self, text: str) -> list[str]:
        """One phoneme string per clause of `text`."""
        ...


class Synthesizer(Protocol):
    @property
    def sample_rate(self) -> int: ...

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> Samples: ...


@runtime_checkable
class Blender(Protocol):
    """A synthesizer that can speak a blend of its voices (Kokoro)."""

    def synthesize_mix(self, phonemes: Sequence[str], mix: Mix, speed: float = 1.0) -> Samples: ...


class SynthesisError(PermanentError):
    """The voice produced no usable audio for a sentence."""

    outcome = Outcome.ENGINE_FAILED


@dataclass(frozen=True, slots=True)
class VitsFiles:
    model: Path
    tokens: Path
    sample_rate: int
    n_speakers: int
    voice: str


@dataclass(frozen=True, slots=True)
class Speech:
    """Synthesised audio: in memory (`samples`) or written to `path`."""

    sample_rate: int
    duration_s: float
    samples: Samples | None = None
    path: Path | None = None
    sentences: int = 0
    processing_s: float = 0.0


@dataclass(frozen=True, slots=True)
class SpokenSentence:
    """A sentence's audio, or a piece of the first sentence's (`chunks.Chunk`)."""

    index: int  # the sentence's
    text: str
    samples: Samples  # includes the pause before it, except for the first sentence
    sample_rate: int


def _int_meta(meta: dict[str, str], key: str, model: Path) -> int:
    try:
        return int(meta[key])
    except ValueError:
        raise ConfigError(f"{model} metadata {key}={meta[key]!r} is not an integer") from None


def validate_model_dir(model_dir: Path, voice: str = "", speaker_id: int = 0) -> VitsFiles:
    """Refuse, with a reason, a voice folder that is not a complete piper voice."""
    from pipelines.onnx_metadata import read_onnx_metadata

    model, tokens = model_dir / "model.onnx", model_dir / "tokens.txt"
    for path in (model, tokens):
        if not path.is_file():
            raise ConfigError(f"TTS model folder {model_dir} has no {path.name}")
    meta = read_onnx_metadata(model)
    missing = [key for key in _VITS_KEYS if not meta.get(key)]
    if missing:
        raise ConfigError(
            f"{model} lacks VITS metadata {', '.join(missing)}: add piper metadata to the"
            " model first"
        )
    if meta.get("model_type", "vits") != "vits" or meta["comment"] != "piper":
        raise ConfigError(
            f"{model} is model_type={meta.get('model_type')!r} comment={meta['comment']!r};"
            " only piper VITS voices are supported"
        )
    sample_rate = _int_meta(meta, "sample_rate", model)
    n_speakers = _int_meta(meta, "n_speakers", model)
    if sample_rate <= 0:
        raise ConfigError(f"{model} has sample_rate={sample_rate}")
    if not 0 <= speaker_id < max(n_speakers, 1):
        raise ConfigError(f"speaker {speaker_id} out of range: the voice has {n_speakers}")
    _check_tokens(tokens)
    voice = voice or meta.get("voice", "") or _json_voice(model_dir / "model.onnx.json")
    if not voice:
        raise ConfigError(f"no espeak voice for {model}: set one in the TTS config")
    return VitsFiles(model, tokens, sample_rate, n_speakers, voice)


def _check_tokens(tokens: Path) -> None:
    lines = tokens.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ConfigError(f"{tokens} is empty")
    for number, line in enumerate(lines, start=1):
        if not line.rsplit(" ", 1)[-1].isdigit() or len(line) < 3:
            raise ConfigError(f"{tokens}:{number} is not '<symbol> <id>': {line!r}")


def _json_voice(path: Path) -> str:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        return str(config.get("espeak", {}).get("voice", ""))
    except (OSError, ValueError, AttributeError):
        return ""


@dataclass(frozen=True, slots=True)
class KokoroVoice:
    name: str
    language: str
    speaker_id: int


@dataclass(frozen=True, slots=True)
class KokoroFiles:
    model: Path
    voices: Path
    tokens: Path
    catalogue: tuple[KokoroVoice, ...]
    sample_rate: int = 24_000
    n_speakers: int = 1
    style_dim: tuple[int, int, int] = (510, 1, 256)

    def voice(self, name: str) -> KokoroVoice:
        for voice in self.catalogue:
            if voice.name == name:
                return voice
        known = ", ".join(v.name for v in self.catalogue)
        raise VoiceError(f"no voice {name!r} in {self.model.parent.name} (voices: {known})")


class VoiceError(PermanentError):
    """A voice the loaded model does not have."""

    outcome = Outcome.UNSUPPORTED


def is_kokoro_dir(model_dir: Path) -> bool:
    return (model_dir / "voices.bin").is_file()


def read_voice_catalogue(model_dir: Path) -> tuple[KokoroVoice, ...]:
    """``voices.json`` of a Kokoro folder; ConfigError when missing or malformed."""
    try:
        data = json.loads((model_dir / "voices.json").read_text(encoding="utf-8"))
        voices = tuple(
            KokoroVoice(str(v["name"]), str(v["language"]), int(v["speaker_id"])) for v in data
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{model_dir}/voices.json is missing or malformed: {exc}") from exc
    if not voices:
        raise ConfigError(f"{model_dir}/voices.json lists no voice")
    return voices


def validate_kokoro_dir(model_dir: Path) -> KokoroFiles:
    """Refuse, with a reason, a Kokoro folder that is incomplete or inconsistent."""
    from pipelines.onnx_metadata import read_onnx_metadata

    files = [model_dir / n for n in ("model.onnx", "voices.bin", "tokens.txt")]
    for path in files:
        if not path.is_file():
            raise ConfigError(f"Kokoro folder {model_dir} has no {path.name}")
    model, voices, tokens = files
    meta = read_onnx_metadata(model)
    missing = [k for k in _KOKORO_KEYS if not meta.get(k)]
    if missing:
        raise ConfigError(
            f"{model} lacks Kokoro metadata {', '.join(missing)}: add Kokoro metadata to the"
            " model first"
        )
    n_speakers = _int_meta(meta, "n_speakers", model)
    dims = [int(d) for d in meta["style_dim"].split(",") if d.strip().isdigit()]
    if len(dims) != 3 or voices.stat().st_size != 4 * n_speakers * dims[0] * dims[2]:
        raise ConfigError(f"{voices} does not hold {n_speakers} voices of {meta['style_dim']}")
    _check_tokens(tokens)
    catalogue = read_voice_catalogue(model_dir)
    if any(not 0 <= v.speaker_id < n_speakers for v in catalogue):
        raise ConfigError(f"{model_dir}/voices.json names a speaker beyond {n_speakers}")
    sample_rate = _int_meta(meta, "sample_rate", model)
    return KokoroFiles(
        model, voices, tokens, catalogue, sample_rate, n_speakers, (dims[0], dims[1], dims[2])
    )


def vocabulary(tokens: Path) -> list[str]:
    return [line[0] for line in tokens.read_text(encoding="utf-8").splitlines() if line]


@dataclass(slots=True)
class Voices:
    """What `for_voice` needs to build another voice on the same loaded model."""

    files: KokoroFiles
    # Builds a language's phonemizer from the model's vocabulary (the engine registry's).
    make_phonemizer: Callable[[list[str], str], Phonemizer]
    phonemizers: dict[str, Phonemizer] = field(default_factory=dict)

    def phonemizer(self, language: str) -> Phonemizer:
        if language not in self.phonemizers:
            vocab = vocabulary(self.files.tokens)
            self.phonemizers[language] = self.make_phonemizer(vocab, language)
        return self.phonemizers[language]


def _blend(files: KokoroFiles, spec: str) -> tuple[KokoroVoice, Mix]:
    """The first voice of a blend (its language speaks the text) and the blend's mix; voices
    of different languages do not blend (each needs its own phonemes)."""
    try:
        parts = parse_blend(spec)
    except BlendError as exc:
        raise VoiceError(str(exc)) from None
    chosen = [files.voice(part.name) for part in parts]
    languages = {voice.language.split("-")[0] for voice in chosen}
    if len(languages) > 1:
        named = ", ".join(f"{v.name} ({v.language})" for v in chosen)
        raise VoiceError(f"voice blend {spec!r} mixes languages: {named}")
    return chosen[0], mix(parts, {v.name: v.speaker_id for v in chosen})


class TextToSpeech:
    """A loaded voice with its phonemizer and settings; one per worker process."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        phonemizer: Phonemizer,
        config: TtsConfig,
        voices: Voices | None = None,
    ):
        self.synthesizer = synthesizer
        self.phonemizer = phonemizer
        self.config = config
        self._voices = voices

    @property
    def sample_rate(self) -> int:
        return self.synthesizer.sample_rate

    @property
    def voice_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self._voices.files.catalogue) if self._voices else ()

    def for_voice(self, voice: str | None = None, speed: float | None = None) -> TextToSpeech:
        """The same loaded model speaking another of its voices and/or at another pace."""
        config = self.config if speed is None else replace(self.config, speed=speed)
        if not voice or voice == self.config.voice:
            return (
                self
                if config is self.config
                else TextToSpeech(self.synthesizer, self.phonemizer, config, self._voices)
            )
        if self._voices is None:
            raise VoiceError(f"{self.config.model_dir.name} has one voice; it has no {voice!r}")
        files = self._voices.files
        if is_blend(voice) and voice not in (v.name for v in files.catalogue):
            chosen, blend = _blend(files, voice)
        else:
            chosen, blend = files.voice(voice), ()
        config = replace(
            config,
            voice=voice,
            speaker_id=chosen.speaker_id,
            mix=blend,
            language=chosen.language,
        )
        return TextToSpeech(
            self.synthesizer, self._voices.phonemizer(chosen.language), config, self._voices
        )

    def sentences(self, text: str) -> list[str]:
        """Raises `TextTooLongError` / `EmptyTextError` before any synthesis."""
        if self.config.language.startswith("zh"):
            return prepare_zh(text, self.config.max_chars, self.config.sentence_chars)
        return prepare(text, self.config.max_chars, self.config.sentence_chars)

    def speak_sentence(self, sentence: str) -> Samples:
        phonemes = self.phonemizer.phonemize(sentence)
        if not phonemes:
            raise SynthesisError(f"no phonemes for {sentence!r}")
        if self.config.mix and isinstance(self.synthesizer, Blender):
            samples = self.synthesizer.synthesize_mix(phonemes, self.config.mix, self.config.speed)
        else:
            samples = self.synthesizer.synthesize(
                phonemes, self.config.speaker_id, self.config.speed
            )
        if samples.size == 0:
            raise SynthesisError(f"the voice returned no audio for {sentence!r}")
        if not np.all(np.isfinite(samples)) or float(np.max(np.abs(samples))) < _SILENT_PEAK:
            raise SynthesisError(f"the voice returned silence for {sentence!r}")
        return samples

    def chunks(self, text: str) -> list[Chunk]:
        """The pieces `stream` speaks; raises like `sentences`."""
        chinese = self.config.language.startswith("zh")
        return plan(self.sentences(text), self.config.first_chunk_words or 0, chinese)

    def stream(self, text: str) -> Iterator[SpokenSentence]:
        """Audio piece by piece; the first arrives after a few words' work."""
        return self._speak_all(self.chunks(text))

    def _speak_all(
        self, chunks: list[Chunk], should_stop: Callable[[], bool] | None = None
    ) -> Iterator[SpokenSentence]:
        pause = np.zeros(int(self.config.sentence_pause_s * self.sample_rate), np.float32)
        keep = int(_JOIN_KEEP_S * self.sample_rate)
        for index, chunk in enumerate(chunks):
            if should_stop is not None and should_stop():
                raise Stopped(f"stopped before piece {index + 1} of {len(chunks)}")
            samples = self.speak_sentence(chunk.text)
            cut_after = index + 1 < len(chunks) and not chunks[index + 1].opens
            samples = _trim_join(samples, keep, start=not chunk.opens, end=cut_after)
            if chunk.sentence and chunk.opens and pause.size:
                samples = np.concatenate([pause, samples])
            yield SpokenSentence(chunk.sentence, chunk.text, samples, self.sample_rate)

    def synthesize(self, text: str) -> Speech:
        started = time.perf_counter()
        parts = list(self.stream(text))
        samples = np.concatenate([part.samples for part in parts])
        return Speech(
            sample_rate=self.sample_rate,
            duration_s=len(samples) / self.sample_rate,
            samples=samples,
            sentences=parts[-1].index + 1,
            processing_s=time.perf_counter() - started,
        )

    def synthesize_to_file(
        self,
        text: str,
        path: Path,
        fmt: str = "ogg",
        on_chunk: Callable[[bytes], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Speech:
        """Write sentence by sentence (any `encode.FORMATS`) and rename into place.

        `on_chunk` gets the encoded bytes added after each sentence, then the rest at the
        end: together they are the file as streamed (see `encode.TeeSink`). `should_stop`
        is asked before each piece is spoken: when it says so, `Stopped` is raised and no
        file is left.
        """
        started = time.perf_counter()
        chunks = self.chunks(text)  # text errors before a file is started
        with SpeechFile(path, self.sample_rate, fmt) as out:
            for part in self._speak_all(chunks, should_stop):
                out.write(part.samples)
                if on_chunk is not None and (chunk := out.drain()):
                    on_chunk(chunk)
        if on_chunk is not None and (chunk := out.drain()):
            on_chunk(chunk)
        return Speech(
            sample_rate=self.sample_rate,
            duration_s=out.frames / self.sample_rate,
            path=path,
            sentences=chunks[-1].sentence + 1,
            processing_s=time.perf_counter() - started,
        )


def _trim_join(samples: Samples, keep: int, *, start: bool, end: bool) -> Samples:
    """Where one sentence was cut in two pieces, the voice's silence at the cut (Kokoro
    pads each run with about 0.3 s) shortened to `keep` samples on each side, so the join
    sounds like a comma, not a full stop. Only quiet samples at the very edge go."""
    if not (start or end):
        return samples
    loud = np.flatnonzero(np.abs(samples) >= _QUIET)
    if loud.size == 0:
        return samples
    first = max(int(loud[0]) - keep, 0) if start else 0
    last = min(int(loud[-1]) + 1 + keep, samples.size) if end else samples.size
    return samples[first:last]
