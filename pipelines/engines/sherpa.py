"""sherpa-onnx adapters: its offline recognizers, its silero VAD and its TTS models.

The only module that imports `sherpa_onnx`. Constructors load models (seconds, hundreds of
MB): once per worker process, after fork. The registry validates folders first
(`pipelines.speech.layout`, the stage validators): sherpa ends the process, without a Python
exception, when a file or a required metadata key is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sherpa_onnx
from numpy.typing import NDArray

from pipelines.speech.layout import Layout, is_multilingual
from pipelines.speech.transcript import Segment

Samples = NDArray[np.float32]
RATE = 16_000


def _recognizer(layout: Layout, threads: int, language: str, task: str) -> object:
    f = layout.file
    match layout.family:
        case "whisper":
            return sherpa_onnx.OfflineRecognizer.from_whisper(
                encoder=f("encoder"), decoder=f("decoder"), tokens=f("tokens"),
                language=language, task=task, num_threads=threads,
            )  # fmt: skip
        case "sense_voice":
            return sherpa_onnx.OfflineRecognizer.from_sense_voice(
                model=f("model"), tokens=f("tokens"), num_threads=threads,
                language=language or "auto", use_itn=True,
            )  # fmt: skip
        case "paraformer":
            return sherpa_onnx.OfflineRecognizer.from_paraformer(
                paraformer=f("model"), tokens=f("tokens"), num_threads=threads
            )
        case "transducer":
            return sherpa_onnx.OfflineRecognizer.from_transducer(
                encoder=f("encoder"), decoder=f("decoder"), joiner=f("joiner"),
                tokens=f("tokens"), num_threads=threads,
            )  # fmt: skip
        case "moonshine":
            return sherpa_onnx.OfflineRecognizer.from_moonshine(
                preprocessor=f("preprocessor"), encoder=f("encoder"),
                uncached_decoder=f("uncached_decoder"), cached_decoder=f("cached_decoder"),
                tokens=f("tokens"), num_threads=threads,
            )  # fmt: skip
    raise ValueError(f"no sherpa-onnx recognizer for {layout.family}")  # pragma: no cover


class SherpaRecognizer:
    """`Transcriber` over one of sherpa-onnx's offline recognizers (16 kHz mono in).

    sherpa returns a window's text, not whisper's timed phrases: a window is one segment,
    from its first token's time (when the model gives token times) to its end.
    """

    sample_rate = RATE

    def __init__(
        self, layout: Layout, threads: int = 1, language: str = "", task: str = "transcribe"
    ) -> None:
        self.family = layout.family
        folder = next(iter(layout.files.values())).parent
        self.multilingual = is_multilingual(folder)
        self._language = language if self.multilingual else "en"
        self._task = task
        self._threads = threads
        self._layout = layout
        self._recognizer: object = _recognizer(layout, threads, self._language, task)

    def transcribe(self, samples: Samples) -> str:
        return self._decode(samples, self._language)[0]

    def recognise_window(
        self, samples: Samples, language: str = ""
    ) -> tuple[tuple[Segment, ...], float, str]:
        text, heard, start = self._decode(samples, language)
        length = len(samples) / RATE
        pieces = (Segment(round(start, 3), round(length, 3), text),) if text else ()
        return pieces, length, heard

    def _decode(self, samples: Samples, language: str) -> tuple[str, str, float]:
        switch = self.family in ("whisper", "sense_voice") and self.multilingual
        if switch and language != self._language:  # the language is the recognizer's config
            self._recognizer = _recognizer(self._layout, self._threads, language, self._task)
            self._language = language
        recognizer = self._recognizer
        stream = recognizer.create_stream()  # type: ignore[attr-defined]
        stream.accept_waveform(RATE, np.ascontiguousarray(samples, dtype=np.float32))
        recognizer.decode_stream(stream)  # type: ignore[attr-defined]
        result = stream.result
        heard = str(getattr(result, "lang", "") or "").strip("<|>").lower()
        times = list(getattr(result, "timestamps", None) or ())
        start = float(times[0]) if times else 0.0
        return str(result.text).strip(), heard or language, start


class SherpaSileroVad:
    """`SpeechDetector` over sherpa-onnx's `VoiceActivityDetector` with a silero model."""

    def __init__(
        self,
        model: Path,
        threshold: float = 0.5,
        min_silence_s: float = 0.5,
        min_speech_s: float = 0.25,
        max_speech_s: float = 20.0,
        threads: int = 1,
    ) -> None:
        self.sample_rate = RATE
        self._window = 512  # silero's window at 16 kHz
        config = sherpa_onnx.VadModelConfig(
            silero_vad=sherpa_onnx.SileroVadModelConfig(
                model=str(model),
                threshold=threshold,
                min_silence_duration=min_silence_s,
                min_speech_duration=min_speech_s,
                max_speech_duration=max_speech_s,
                window_size=self._window,
            ),
            sample_rate=RATE,
            num_threads=threads,
        )
        # The buffer holds audio not yet handed out: room for the longest region and more.
        self._vad = sherpa_onnx.VoiceActivityDetector(
            config, buffer_size_in_seconds=max(60.0, 3 * max_speech_s)
        )

    def accept(self, samples: Samples) -> None:
        # Fed more than a window at a time, sherpa's detector misses regions and skips its
        # max_speech_duration cut (measured with 2.0.1): one window per call.
        for start in range(0, len(samples), self._window):
            self._vad.accept_waveform(samples[start : start + self._window])

    def flush(self) -> None:
        self._vad.flush()

    def reset(self) -> None:
        self._vad.reset()

    def pop(self) -> list[tuple[int, Samples]]:
        out: list[tuple[int, Samples]] = []
        while not self._vad.empty():
            segment = self._vad.front
            out.append((int(segment.start), np.asarray(segment.samples, dtype=np.float32)))
            self._vad.pop()
        return out


def _tts_model(layout: Layout, noise_scale: float, noise_scale_w: float) -> dict[str, Any]:
    f = layout.file
    shared = {"tokens": f("tokens"), "data_dir": f("data_dir"), "dict_dir": f("dict_dir")}
    lexicon = f("lexicon")
    match layout.family:
        case "kokoro":
            kokoro = sherpa_onnx.OfflineTtsKokoroModelConfig(
                model=f("model"), voices=f("voices"), lexicon=lexicon, **shared
            )
            return {"kokoro": kokoro}
        case "matcha":
            matcha = sherpa_onnx.OfflineTtsMatchaModelConfig(
                acoustic_model=f("acoustic_model"), vocoder=f("vocoder"), lexicon=lexicon,
                noise_scale=noise_scale, **shared,
            )  # fmt: skip
            return {"matcha": matcha}
    vits = sherpa_onnx.OfflineTtsVitsModelConfig(
        model=f("model"), lexicon=lexicon, noise_scale=noise_scale,
        noise_scale_w=noise_scale_w, **shared,
    )  # fmt: skip
    return {"vits": vits}


class SherpaTts:
    """`Synthesizer` over sherpa-onnx's `OfflineTts` (VITS/piper, Matcha, Kokoro).

    sherpa-onnx 2.x carries no espeak: a voice that speaks espeak phonemes gets them from our
    phonemizer as code points; a voice with a lexicon (`text_input`) reads the text itself.
    """

    def __init__(
        self,
        layout: Layout,
        threads: int = 1,
        noise_scale: float = 0.667,
        noise_scale_w: float = 0.8,
        text_input: bool = False,
    ) -> None:
        model = sherpa_onnx.OfflineTtsModelConfig(
            **_tts_model(layout, noise_scale, noise_scale_w), num_threads=threads
        )
        self._tts = sherpa_onnx.OfflineTts(
            sherpa_onnx.OfflineTtsConfig(model=model, max_num_sentences=1)
        )
        self.sample_rate = int(self._tts.sample_rate)
        self.text_input = text_input

    def synthesize(
        self, phonemes: Sequence[str], speaker_id: int = 0, speed: float = 1.0
    ) -> Samples:
        generation = sherpa_onnx.GenerationConfig()
        generation.sid = speaker_id
        generation.speed = speed
        parts = [part for part in phonemes if part]
        if not parts:
            return np.zeros(0, dtype=np.float32)
        if not self.text_input:
            generation.phoneme_codepoints = [[ord(ch) for ch in part] for part in parts]
        audio = self._tts.generate(" ".join(parts) if self.text_input else "", generation)
        return np.asarray(audio.samples, dtype=np.float32)
