"""whisper on onnxruntime: log-mel features, the encoder once per window, greedy decoding;
one window at a time, or many in one call (`recognise_windows`: one encoder run for all of
them, then one decoder run a step, `whisper_greedy.decode_in_lockstep`).

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
there). The window is not padded to whisper's 30 s: its features (`whisper_features`) are
followed by frames of zeros, which is what lets whisper end the text. A multilingual model not
told the language detects it from the first step's language-token logits, as whisper does.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.engines.ort import cpu_session
from pipelines.engines.whisper_features import (
    HOP,
    N_FFT,
    RATE,
    WhisperMeta,
    encoder_input,
    read_vocabulary,
)
from pipelines.engines.whisper_greedy import Cross, Decoded, GreedyRow, decode_in_lockstep
from pipelines.engines.whisper_timestamps import (
    SECONDS_PER_TIMESTAMP,
    TimedTokens,
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
from pipelines.speech.transcript import Segment, Word

Samples = NDArray[np.float32]

# Windows per encoder run: at 8 the run's attention scores (about 0.4 GB a layer for tiny)
# outgrow the caches and 8 windows took twice as long as two runs of 4 (2 cores).
_ENCODER_ROWS = 4
_TOKENS_PER_S = 6  # a budget no speech exceeds, so a decoding loop ends early


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
        if filters.shape != (meta.n_mels, N_FFT // 2 + 1):
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
        self._tail_frames = round(tail_padding_s * RATE / HOP)
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

    def recognise_windows(
        self, windows: Sequence[Samples], language: str = ""
    ) -> list[tuple[tuple[Segment, ...], float, str]]:
        """`recognise_window` of each of `windows`, decoded together (`decode_windows`)."""
        return [
            ((() if w.silent else w.pieces), w.used_s, w.language)
            for w in self.decode_windows(windows, language)
        ]

    def decode_window(
        self, samples: Samples, language: str = "", words: bool = False
    ) -> DecodedWindow:
        """One window decoded, with what whisper's decoding says of it (silent or not)."""
        if words and not self.word_timestamps:
            raise ConfigError(
                f"{self._decoder_path} has no alignment output, so it cannot time words:"
                " re-export the model (mcp-media models prepare)"
            )
        mel, frames = encoder_input(
            samples.astype(np.float32, copy=False), self._filters, self._tail_frames
        )
        cross = dict(zip(self._cross, self._encoder.run(None, {"mel": mel}), strict=True))
        if self.meta.multilingual and not language:
            language = self._detect(cross)
        prompt = self._prompt(language)
        row = GreedyRow(self.meta, self._suppressed, self._budget(frames))
        (decoded,) = decode_in_lockstep([row], prompt, cross, self._cache, self._step)
        timed = words and not decoded.silent
        return self._window(decoded, frames, language, (samples, prompt, cross) if timed else None)

    def decode_windows(self, windows: Sequence[Samples], language: str = "") -> list[DecodedWindow]:
        """Each window decoded as `decode_window` would, in one encoder run (of up to
        `_ENCODER_ROWS` windows) and one decoder run a step for them all
        (`whisper_greedy.decode_in_lockstep`). Their features are padded to the longest
        with zero frames, as each window's own padding is (whisper pads every window to
        30 s). A multilingual model not told the language decodes window after window
        (each detects its own)."""
        if len(windows) < 2 or (self.meta.multilingual and not language):
            return [self.decode_window(samples, language) for samples in windows]
        inputs = [
            encoder_input(w.astype(np.float32, copy=False), self._filters, self._tail_frames)
            for w in windows
        ]
        meta = self.meta
        mel = np.zeros((len(inputs), meta.n_mels, max(m.shape[2] for m, _ in inputs)), np.float32)
        for row, (features, _) in enumerate(inputs):
            mel[row, :, : features.shape[2]] = features[0]
        parts = [
            self._encoder.run(None, {"mel": mel[at : at + _ENCODER_ROWS]})
            for at in range(0, len(mel), _ENCODER_ROWS)
        ]
        cross = {
            name: np.concatenate([outputs[j] for outputs in parts])
            for j, name in enumerate(self._cross)
        }
        prompt = self._prompt(language)
        rows = [GreedyRow(meta, self._suppressed, self._budget(n)) for _, n in inputs]
        cache = np.empty((len(self._past), len(rows), meta.n_text_ctx, meta.n_text_state), "f4")
        decoded = decode_in_lockstep(rows, prompt, cross, cache, self._step)
        return [
            self._window(d, frames, language, None)
            for d, (_, frames) in zip(decoded, inputs, strict=True)
        ]

    def _prompt(self, language: str) -> list[int]:
        meta = self.meta
        if not meta.multilingual:
            return [meta.sot]
        if language not in meta.languages:
            raise ConfigError(f"whisper knows no language {language!r}")
        return [meta.sot, meta.languages[language], self._task]

    def _budget(self, frames: int) -> int:
        return min(frames * _TOKENS_PER_S // 100, self.meta.n_text_ctx // 2)

    def _window(
        self,
        decoded: Decoded,
        frames: int,
        language: str,
        words: tuple[Samples, list[int], Cross] | None,
    ) -> DecodedWindow:
        """A window's decoded tokens as timed pieces (`words`: the window's samples, prompt
        and encoder output, to time each piece's words)."""
        meta = self.meta
        language = language if meta.multilingual else "en"
        audio_s = frames * HOP / RATE
        window = split_window(decoded.tokens, meta.timestamp_begin, meta.eot)
        ratio = compression_ratio(self._text([t for t in decoded.tokens if t < meta.eot]))
        timed = (
            self._words(*words, window.pieces, frames, language)
            if words is not None
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

    def _words(
        self,
        samples: Samples,
        prompt: list[int],
        cross: Cross,
        pieces: tuple[TimedTokens, ...],
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
        audio_s = frames * HOP / RATE
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

    def _detect(self, cross: Cross) -> str:
        tokens = np.array([[self.meta.sot]], dtype=np.int64)
        logits = self._step(tokens, 0, self._cache, cross)[-1]
        codes = list(self.meta.languages)
        ids = np.array([self.meta.languages[c] for c in codes])
        return codes[int(np.argmax(logits[ids]))]

    def _step(
        self, tokens: NDArray[np.int64], offset: int, cache: NDArray[np.float32], cross: Cross
    ) -> NDArray[np.float32]:
        """The last token's logits [rows, vocab] after `tokens` [rows, n] at `offset`; their
        keys/values go into `cache` [2 x layers, rows, context, state]."""
        feeds: dict[str, NDArray[np.generic]] = {
            "tokens": tokens,
            "offset": np.array([offset], dtype=np.int64),
        }
        for j, name in enumerate(self._past):
            feeds[name] = cache[j, :, :offset]
        logits, *written = self._decoder.run(self._step_outputs, {**feeds, **cross})
        end = offset + tokens.shape[1]
        for j, rows in enumerate(written):
            cache[j, :, offset:end] = rows
        return np.asarray(logits[:, -1], dtype=np.float32)
