"""A model folder's manifest, written last: what was built from which pinned packages, and
each file's sha256, size and mtime. A folder whose files match it is complete; any other is
rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from workers.provisioning.specs import ModelSpec

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
HASH_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"manifest unreadable: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ConfigError("manifest is not a model manifest")
    return data


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)


def folder_problem(folder: Path, spec: ModelSpec, *, deep: bool) -> str | None:
    """Why ``folder`` is not a complete build of ``spec``; None when it is.

    The fast path trusts a file whose size and mtime match the manifest; a changed mtime
    (a copied home, a touched file) costs one re-hash, after which the manifest is refreshed.
    """
    if not folder.is_dir():
        return "missing"
    try:
        manifest = read_manifest(folder)
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
            if sha256_file(path) != entry.get("sha256"):
                return f"{name} does not match its sha256 in the manifest"
            if stat.st_mtime_ns != entry.get("mtime_ns"):
                entry["mtime_ns"] = stat.st_mtime_ns
                refreshed = True
    if refreshed:
        with contextlib.suppress(OSError):
            write_json(folder / MANIFEST, manifest)
    return None


def _sources(spec: ModelSpec) -> list[dict[str, str]]:
    return [
        {"requirement": s.requirement, "file": s.filename, "sha256": s.sha256} for s in spec.sources
    ]


def write_manifest(spec: ModelSpec, folder: Path, extra: Mapping[str, Any]) -> None:
    files = {}
    for name in spec.files:
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"{spec.name}: build produced no {name}")
        stat = path.stat()
        files[name] = {
            "sha256": sha256_file(path),
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
        }
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
    write_json(folder / MANIFEST, manifest)
