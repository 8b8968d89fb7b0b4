"""whisper on onnxruntime: log-mel features, the encoder once per window, greedy decoding.

Runs the folders `models prepare` builds (`workers/provisioning/whisper_export.py`): the
encoder hands each decoder layer its own cross-attention keys/values, and a decoder step takes
each layer's past keys/values as views of a cache this class keeps, returning only the new
tokens' rows. A step therefore copies no cache; with sherpa-onnx's stacked layout every step
copied the whole self-attention cache and every layer's cross keys/values (measured on
tiny.en, one thread: about half of a step).

Decoding is greedy with timestamps, as whisper and faster-whisper decode by default: the
prompt ``<|startoftranscript|> [<|lang|> <|task|>]``, then the most likely token under
whisper's timestamp rules (`whisper_timestamps`) and its suppressed tokens, until
``<|endoftext|>`` or a budget of 6 text tokens per second of audio (a loop on one phrase ends
there). The window is not padded to whisper's 30 s: its features are followed by frames of
zeros, which is what lets whisper end the text. A multilingual model not told the language
detects it from the first step's language-token logits, as whisper does.
"""

from __future__ import annotations

import base64
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.engines.whisper_timestamps import (
    SECONDS_PER_TIMESTAMP,
    TimedTokens,
    apply_timestamp_rules,
    split_window,
)
from pipelines.engines.whisper_words import (
    UNSPACED,
    attention_matrix,
    snap_to_sound,
    split_words,
    starts_after_marks,
    token_onsets,
    trailing_marks,
    voiced_frames,
    word_spans,
)
from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata
from pipelines.speech.transcript import Segment, Word

Samples = NDArray[np.float32]

RATE = 16_000
_N_FFT = 400
_HOP = 160
_MAX_FRAMES = 3000  # 30 s: the encoder's position table
_MIN_TAIL_FRAMES = 50  # audio is cut so that at least this much padding follows it
_TOKENS_PER_S = 6  # a budget no speech exceeds, so a decoding loop ends early
# whisper's silence rule: a window is nobody speaking when <|nospeech|> is likely at the start
# and the text decoded is not confident (its `no_speech_threshold`, `logprob_threshold`).
_NO_SPEECH_PROB = 0.6
_LOGPROB_FLOOR = -1.0


@dataclass(frozen=True, slots=True)
class _Decoded:
    tokens: list[int]  # after the prompt, the end of text excluded
    no_speech_prob: float  # of <|nospeech|> at <|startoftranscript|>
    avg_logprob: float  # per token chosen, the end of text included

    @property
    def silent(self) -> bool:
        return self.no_speech_prob > _NO_SPEECH_PROB and self.avg_logprob <= _LOGPROB_FLOOR


@dataclass(frozen=True, slots=True)
class DecodedWindow:
    pieces: tuple[Segment, ...]  # timed within the window, silent or not
    used_s: float
    language: str
    no_speech_prob: float
    avg_logprob: float
    silent: bool  # whisper's rule: nobody speaks, whatever was decoded


def compression_ratio(text: str) -> float:
    """The text's bytes over their zlib-compressed size (whisper's measure of repetition:
    above 2.4 a window is taken to be looping)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


@dataclass(frozen=True, slots=True)
class WhisperMeta:
    """What the encoder's metadata says about the model (sherpa-onnx's key names)."""

    n_mels: int
    n_text_layer: int
    n_text_ctx: int
    n_text_state: int
    n_vocab: int
    sot: int
    eot: int
    no_timestamps: int
    transcribe: int
    translate: int
    multilingual: bool
    languages: dict[str, int]
    no_speech: int
    blank: int
    # Never chosen: symbols whisper writes for non-speech ("♪", "[", ...) and the prompt's
    # own special tokens (whisper's and faster-whisper's default `suppress_tokens`).
    suppressed: tuple[int, ...]

    @property
    def timestamp_begin(self) -> int:
        """The first timestamp token (<|0.00|>), right after <|notimestamps|>."""
        return self.no_timestamps + 1

    @classmethod
    def read(cls, encoder: Path) -> WhisperMeta:
        meta = read_onnx_metadata(encoder)
        try:

            def ints(key: str) -> tuple[int, ...]:
                return tuple(int(x) for x in meta.get(key, "").split(",") if x.strip())

            codes = [c for c in meta.get("all_language_codes", "").split(",") if c]
            return cls(
                n_mels=int(meta["n_mels"]),
                n_text_layer=int(meta["n_text_layer"]),
                n_text_ctx=int(meta["n_text_ctx"]),
                n_text_state=int(meta["n_text_state"]),
                n_vocab=int(meta["n_vocab"]),
                sot=int(meta["sot"]),
                eot=int(meta["eot"]),
                no_timestamps=int(meta["no_timestamps"]),
                transcribe=int(meta["transcribe"]),
                translate=int(meta["translate"]),
                multilingual=meta["is_multilingual"] != "0",
                languages=dict(zip(codes, ints("all_language_tokens"), strict=True)),
                no_speech=int(meta["no_speech"]),
                blank=int(meta["blank_id"]),
                suppressed=(
                    *ints("non_speech_tokens"),
                    *(int(meta[k]) for k in ("transcribe", "translate", "sot", "no_speech")),
                    *(int(meta[k]) for k in ("sot_prev", "sot_lm") if k in meta),
                ),
            )
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{encoder}: whisper metadata unusable ({exc})") from None


def read_vocabulary(tokens: Path) -> list[bytes]:
    """``<base64 bytes> <rank>`` per line, ranks 0, 1, 2, ... in order."""
    vocabulary: list[bytes] = []
    for number, line in enumerate(tokens.read_text(encoding="ascii").splitlines()):
        encoded, _, rank = line.partition(" ")
        if rank != str(number):
            raise ConfigError(f"{tokens}:{number + 1} is not '<base64> {number}'")
        try:
            # multilingual.tiktoken writes one empty token as a lone "="
            empty = encoded == "="
            vocabulary.append(b"" if empty else base64.b64decode(encoded, validate=True))
        except ValueError:
            raise ConfigError(f"{tokens}:{number + 1} is not base64") from None
    return vocabulary


def log_mel(samples: Samples, filters: NDArray[np.float32]) -> NDArray[np.float32]:
    """whisper's normalised log-mel spectrogram [n_mels, len // 160] of `samples`."""
    audio = samples
    if len(audio) < _N_FFT:
        audio = np.concatenate([audio, np.zeros(_N_FFT - len(audio), np.float32)])
    padded = np.pad(audio, _N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, _N_FFT)[::_HOP][:-1]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(_N_FFT) / _N_FFT)).astype(np.float32)
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
    mel = filters @ power.T.astype(np.float32)
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)
    features: NDArray[np.float32] = ((log + 4.0) / 4.0).astype(np.float32)
    return features


def encoder_input(
    samples: Samples, filters: NDArray[np.float32], tail_frames: int
) -> tuple[NDArray[np.float32], int]:
    """([1, n_mels, frames] for the encoder, frames of audio in it).

    The audio's features, cut to leave room for padding within 30 s, then `tail_frames` of
    zeros (0 in the normalised domain, where silence sits near -1) up to 3000 frames in all:
    it is what lets whisper find the end of the text once the 30 s window is gone.
    """
    audio = samples[: (_MAX_FRAMES - _MIN_TAIL_FRAMES) * _HOP]
    features = log_mel(audio, filters)
    n_mels, frames = features.shape
    total = min(frames + max(tail_frames, 1), _MAX_FRAMES)
    mel = np.zeros((1, n_mels, total), dtype=np.float32)
    mel[0, :, :frames] = features
    return mel, frames


class OrtWhisper:
    """`Transcriber` over an encoder/decoder pair in our per-layer layout (16 kHz in)."""

    sample_rate = RATE
    concurrent = True  # windows may be decoded from several threads at once

    def __init__(
        self,
        encoder: Path,
        decoder: Path,
        tokens: Path,
        mel_filters: Path,
        threads: int = 1,
        language: str = "en",
        task: str = "transcribe",
        tail_padding_s: float = 3.0,
    ) -> None:
        self.meta = meta = WhisperMeta.read(encoder)
        self.multilingual = meta.multilingual
        filters = np.load(mel_filters, allow_pickle=False)
        if filters.shape != (meta.n_mels, _N_FFT // 2 + 1):
            raise ConfigError(f"{mel_filters} has shape {filters.shape}, not ({meta.n_mels}, 201)")
        self._filters = filters.astype(np.float32)
        self._vocabulary = read_vocabulary(tokens)
        if len(self._vocabulary) > meta.eot:
            raise ConfigError(
                f"{tokens} has {len(self._vocabulary)} tokens; text ends at {meta.eot}"
            )
        self._encoder = cpu_session(encoder, threads)
        self._decoder = cpu_session(decoder, threads)
        layers = range(meta.n_text_layer)
        self._cross = [f"cross_{kv}{i}" for i in layers for kv in "kv"]
        self._past = [f"past_{kv}{i}" for i in layers for kv in "kv"]
        found = {i.name for i in self._decoder.get_inputs()}
        if found != {"tokens", "offset", *self._past, *self._cross}:
            raise ConfigError(f"{decoder} is not a decoder of this layout (inputs {sorted(found)})")
        self._decoder_path = decoder
        self._step_outputs = [o.name for o in self._decoder.get_outputs() if o.name != "alignment"]
        # Exports before word timestamps have no alignment output: they transcribe as before.
        self.word_timestamps = len(self._step_outputs) < len(self._decoder.get_outputs())
        # Each thread decoding a window keeps its own cache, so windows may be decoded side
        # by side (`concurrent`): onnxruntime runs one session from many threads.
        self._caches = threading.local()
        self._language = language if meta.multilingual else "en"
        if task not in ("transcribe", "translate"):
            raise ConfigError(f"unknown whisper task {task!r}: transcribe or translate")
        self._task = meta.translate if task == "translate" else meta.transcribe
        self._tail_frames = round(tail_padding_s * RATE / _HOP)
        self._suppressed = np.array(meta.suppressed, dtype=np.int64)

    def transcribe(self, samples: Samples) -> str:
        pieces, _, _ = self.recognise_window(samples, self._language)
        return " ".join(p.text for p in pieces if p.text)

    def recognise_window(
        self, samples: Samples, language: str = "", words: bool = False
    ) -> tuple[tuple[Segment, ...], float, str]:
        """(timed pieces, seconds used, language) of at most 30 s, decoded with timestamps.

        Times are within the window. Seconds used: where the next window should start (the
        last complete timestamp when the last piece was cut off by the window's end). Each
        piece carries its tokens and the window's `avg_logprob`, `compression_ratio` and
        `no_speech_prob` (and with `words`, its words' times); a window whisper's no-speech
        rule calls silent has no pieces."""
        window = self.decode_window(samples, language, words)
        return (() if window.silent else window.pieces), window.used_s, window.language

    def decode_window(
        self, samples: Samples, language: str = "", words: bool = False
    ) -> DecodedWindow:
        """One window decoded, with what whisper's decoding says of it (silent or not)."""
        if words and not self.word_timestamps:
            raise ConfigError(
                f"{self._decoder_path} has no alignment output, so it cannot time words:"
                " re-export the model (mcp-media models prepare)"
            )
        meta = self.meta
        mel, frames = encoder_input(
            samples.astype(np.float32, copy=False), self._filters, self._tail_frames
        )
        budget = min(frames * _TOKENS_PER_S // 100, meta.n_text_ctx // 2)
        cross = dict(zip(self._cross, self._encoder.run(None, {"mel": mel}), strict=True))
        if not meta.multilingual:
            language, prompt = "en", [meta.sot]
        else:
            language = language or self._detect(cross)
            if language not in meta.languages:
                raise ConfigError(f"whisper knows no language {language!r}")
            prompt = [meta.sot, meta.languages[language], self._task]
        decoded = self._decode_timed(prompt, cross, budget)
        audio_s = frames * _HOP / RATE
        window = split_window(decoded.tokens, meta.timestamp_begin, meta.eot)
        ratio = compression_ratio(self._text([t for t in decoded.tokens if t < meta.eot]))
        timed = (
            self._words(samples, prompt, window.pieces, cross, frames, language)
            if words and not decoded.silent
            else [()] * len(window.pieces)
        )
        pieces = tuple(
            Segment(
                min(p.start * SECONDS_PER_TIMESTAMP, audio_s),
                audio_s if p.end is None else min(p.end * SECONDS_PER_TIMESTAMP, audio_s),
                self._text(p.tokens),
                tokens=p.written,
                avg_logprob=decoded.avg_logprob,
                compression_ratio=ratio,
                no_speech_prob=decoded.no_speech_prob,
                words=spoken,
            )
            for p, spoken in zip(window.pieces, timed, strict=True)
        )
        used = audio_s if window.seek is None else min(window.seek * SECONDS_PER_TIMESTAMP, audio_s)
        return DecodedWindow(
            pieces, used, language, decoded.no_speech_prob, decoded.avg_logprob, decoded.silent
        )

    def _decode_timed(
        self, prompt: list[int], cross: dict[str, NDArray[np.float32]], budget: int
    ) -> _Decoded:
        """Greedy under whisper's timestamp rules, until the end or `budget` text tokens."""
        meta = self.meta
        chosen: list[int] = []
        feed, offset, text, total_logprob = prompt, 0, 0, 0.0
        no_speech_prob = 0.0
        while text < budget and offset + len(feed) < meta.n_text_ctx:
            rows = self._step(feed, offset, cross)
            if not chosen:
                no_speech_prob = float(_softmax(rows[0])[meta.no_speech])
            logits = rows[-1]
            logits[self._suppressed] = -np.inf
            if not chosen:
                logits[[meta.blank, meta.eot]] = -np.inf
            apply_timestamp_rules(logits, chosen, meta.timestamp_begin, meta.eot)
            token = int(np.argmax(logits))
            total_logprob += float(np.log(_softmax(logits)[token]))
            if token == meta.eot:
                break
            text += token < meta.eot
            offset += len(feed)
            chosen.append(token)
            feed = [token]
        return _Decoded(chosen, no_speech_prob, total_logprob / (len(chosen) + 1))

    def _words(
        self,
        samples: Samples,
        prompt: list[int],
        pieces: tuple[TimedTokens, ...],
        cross: dict[str, NDArray[np.float32]],
        frames: int,
        language: str,
    ) -> list[tuple[Word, ...]]:
        """Each piece's words, timed within the window by cross-attention alignment
        (`whisper_words`): the decoder run once over the prompt, <|notimestamps|>, the
        window's text and <|endoftext|>; a token's row is the one that predicts it. Words
        after punctuation start where sound begins under it; words shrink to their sound."""
        meta = self.meta
        grouped = [split_words(p.tokens, self._bytes, language not in UNSPACED) for p in pieces]
        text = [t for words in grouped for word in words for t in word.tokens]
        if not text:
            return [()] * len(pieces)
        sequence = [*prompt, meta.no_timestamps, *text, meta.eot]
        feeds: dict[str, NDArray[np.generic]] = {
            "tokens": np.array([sequence], dtype=np.int64),
            "offset": np.array([0], dtype=np.int64),
            **{name: self._cache[j, :, :0] for j, name in enumerate(self._past)},
        }
        (scores,) = self._decoder.run(["alignment"], {**feeds, **cross})
        matrix = attention_matrix(np.asarray(scores, dtype=np.float32), frames // 2)
        onsets = token_onsets(matrix[len(prompt) : -1])
        every = [w for words in grouped for w in words]
        voiced = voiced_frames(samples, RATE)
        marks = [trailing_marks(word, self._bytes) for word in every]
        onsets = starts_after_marks(every, marks, onsets, voiced)
        spans = iter(snap_to_sound(word_spans(every, onsets), voiced))
        audio_s = frames * _HOP / RATE
        return [
            tuple(
                Word(word.text.strip(), min(start, audio_s), min(end, audio_s))
                for word, (start, end) in zip(words, spans, strict=False)
            )
            for words in grouped
        ]

    @property
    def _cache(self) -> NDArray[np.float32]:
        """This thread's self-attention cache: [2 x layers, 1, text context, state]."""
        cache: NDArray[np.float32] | None = getattr(self._caches, "cache", None)
        if cache is None:
            meta = self.meta
            shape = (len(self._past), 1, meta.n_text_ctx, meta.n_text_state)
            cache = self._caches.cache = np.zeros(shape, dtype=np.float32)
        return cache

    def _bytes(self, tokens: Sequence[int]) -> bytes:
        return b"".join(self._vocabulary[t] for t in tokens if t < len(self._vocabulary))

    def _text(self, tokens: Sequence[int]) -> str:
        return self._bytes(tokens).decode("utf-8", "replace").strip()

    def _detect(self, cross: dict[str, NDArray[np.float32]]) -> str:
        logits = self._step([self.meta.sot], 0, cross)[-1]
        codes = list(self.meta.languages)
        ids = np.array([self.meta.languages[c] for c in codes])
        return codes[int(np.argmax(logits[ids]))]

    def _step(
        self, tokens: list[int], offset: int, cross: dict[str, NDArray[np.float32]]
    ) -> NDArray[np.float32]:
        """Logits after each of `tokens`, run at `offset`; their keys/values go into the cache."""
        feeds: dict[str, NDArray[np.generic]] = {
            "tokens": np.array([tokens], dtype=np.int64),
            "offset": np.array([offset], dtype=np.int64),
        }
        cache = self._cache
        for j, name in enumerate(self._past):
            feeds[name] = cache[j, :, :offset]
        logits, *written = self._decoder.run(self._step_outputs, {**feeds, **cross})
        end = offset + len(tokens)
        for j, rows in enumerate(written):
            cache[j, :, offset:end] = rows
        return np.asarray(logits[0], dtype=np.float32)


def _softmax(logits: NDArray[np.float32]) -> NDArray[np.float32]:
    shifted = np.exp(logits - np.max(logits))
    result: NDArray[np.float32] = shifted / np.sum(shifted)
    return result
