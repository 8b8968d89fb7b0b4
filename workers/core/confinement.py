"""What this process writes and what it hands on of its environment: native libraries kept
inside the home, and the environment the user started us with for the programs we run on
their behalf.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def confine_process(home: Path) -> None:
    """Keep what native libraries write inside `home`, for this process and its children.

    onnxruntime (the OCR engine's) starts a telemetry client when it is imported: it writes
    `$XDG_CACHE_HOME/Microsoft/DeveloperTools/.onnxruntime/{onnxruntime.db,deviceid}` and
    `$TMPDIR/.ses` (O_TRUNC, following symlinks). `ORT_DISABLE_TELEMETRY=1` stops all of it;
    XDG_CACHE_HOME and TMPDIR under the home keep anything else a library caches or
    spools there. MCP_MEDIA_HOME is exported too, so a child that would derive its home
    from XDG_CACHE_HOME finds the same one. Call it at the process edge (the CLI, the
    Celery app), before any engine is imported: pipelines/ reads no environment.
    """
    for name in _CONFINED:
        _USER_ENV.setdefault(name, os.environ.get(name))
    runtime = home / "runtime"
    cache, tmp = runtime / "xdg-cache", runtime / "tmp"
    for folder in (home, runtime, cache, tmp):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["MCP_MEDIA_HOME"] = str(home)
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    os.environ["XDG_CACHE_HOME"] = str(cache)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None  # tempfile reads TMPDIR again on its next use


_CONFINED = ("MCP_MEDIA_HOME", "ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME", "TMPDIR")
_USER_ENV: dict[str, str | None] = {}  # their values before `confine_process`
_COERCED_LOCALES = frozenset({"C.UTF-8", "C.utf8", "UTF-8"})


def user_environment() -> dict[str, str]:
    """The environment the user started us with, for a program run on their behalf (an
    upstream MCP server): without what `confine_process` set, without the LC_CTYPE that
    Python's C-locale coercion (PEP 538) adds, and without the MCP_MEDIA_ settings."""
    env = dict(os.environ)
    for name, value in _USER_ENV.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    coerced = (
        env.get("LC_CTYPE") in _COERCED_LOCALES
        and not env.get("LC_ALL")
        and env.get("LANG") in (None, "", "C", "POSIX")
    )
    if coerced:
        env.pop("LC_CTYPE")
    return {k: v for k, v in env.items() if not k.startswith("MCP_MEDIA_")}
