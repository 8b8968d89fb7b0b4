"""whisper's inputs, read without a model run: the encoder's metadata, the vocabulary, and
the log-mel features of a window (as whisper computes them), padded for the encoder."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata

Samples = NDArray[np.float32]

RATE = 16_000
N_FFT = 400
HOP = 160
_MAX_FRAMES = 3000  # 30 s: the encoder's position table
_MIN_TAIL_FRAMES = 50  # audio is cut so that at least this much padding follows it


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
    if len(audio) < N_FFT:
        audio = np.concatenate([audio, np.zeros(N_FFT - len(audio), np.float32)])
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:-1]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)
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
    audio = samples[: (_MAX_FRAMES - _MIN_TAIL_FRAMES) * HOP]
    features = log_mel(audio, filters)
    n_mels, frames = features.shape
    total = min(frames + max(tail_frames, 1), _MAX_FRAMES)
    mel = np.zeros((1, n_mels, total), dtype=np.float32)
    mel[0, :, :frames] = features
    return mel, frames
