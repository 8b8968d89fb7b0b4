"""What the speech stages take: frozen configs, free of numpy, PyAV and sherpa-onnx.

The job client computes processor versions from these without loading any engine, so this
module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.speech.text import DEFAULT_MAX_CHARS, DEFAULT_SENTENCE_CHARS


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    max_bytes: int = 512 * 1024 * 1024
    max_seconds: float = 7200.0
    max_wall_s: float = 600.0


@dataclass(frozen=True, slots=True)
class SttConfig:
    model_dir: Path
    vad_model: Path | None = None  # silero_vad.onnx or its folder; None: cut at quiet points
    threads: int = 1
    # "" : the model's own ("en" for English-only models, detected for multilingual ones).
    language: str = ""
    task: str = "transcribe"  # or "translate" (to English; multilingual models only)
    word_timestamps: bool = False  # also time each word (`Transcript.words`)
    # Mandarin transcripts are written in this script (`chinese_script.SCRIPTS`).
    chinese_script: str = "simplified"
    max_seconds: float = 7200.0
    max_bytes: int = 512 * 1024 * 1024
    decode_wall_s: float = 600.0
    single_pass_s: float = 25.0
    max_segment_s: float = 28.0
    # Silence appended to every chunk so whisper finds the end of the text (within 30 s in
    # all: the chunk is at most `max_segment_s`); the encoder runs on it too.
    tail_padding_s: float = 3.0
    # Real silence appended to audio recognised in one pass: with only 3 s of padding a
    # short clip's last words were sometimes lost (measured on the round-trip sentences).
    single_pass_silence_s: float = 2.0
    # auto (by the folder's layout), native (our onnxruntime engines) or sherpa-onnx.
    engine: str = "auto"
    # Long audio: this many windows, cut where nobody speaks, decoded together (engines
    # that allow it: our whisper, in one call); 1 reads window after window, each
    # continuing where the last one's text stopped. Jobs take the setting's default (4).
    batch_windows: int = 1

    @property
    def limits(self) -> DecodeLimits:
        return DecodeLimits(self.max_bytes, self.max_seconds, self.decode_wall_s)


@dataclass(frozen=True, slots=True)
class TtsConfig:
    model_dir: Path
    threads: int = 1
    # piper: the espeak voice ("" takes the model's own, from metadata or .onnx.json);
    # Kokoro: a voice name of the folder's voices.json ("" takes its first voice).
    voice: str = ""
    speaker_id: int = 0
    # Kokoro: a blend of its voices, (speaker id, coefficient) each; () is `speaker_id` alone.
    mix: tuple[tuple[int, float], ...] = ()
    language: str = ""  # set from the voice when loaded: en-us, en-gb, zh
    speed: float = 1.0
    noise_scale: float = 0.667  # 0 and 0: deterministic, bit-identical output
    noise_scale_w: float = 0.8
    max_chars: int = DEFAULT_MAX_CHARS
    sentence_chars: int = DEFAULT_SENTENCE_CHARS
    sentence_pause_s: float = 0.25
    engine: str = "auto"  # auto (by the folder's layout), native or sherpa-onnx
    # The first sentence's opening clause, or this many words, is spoken alone (the first
    # audio waits for it only); 0: the first sentence whole; None: the engine's own (Kokoro
    # `chunks.KOKORO_FIRST_WORDS`; piper 0: its first sentence takes a tenth of a second).
    first_chunk_words: int | None = None
