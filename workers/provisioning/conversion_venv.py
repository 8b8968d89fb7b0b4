"""The isolated venv our conversion scripts run in (torch CPU, openai-whisper, onnx), under
``<home>/tools``, never in the runtime install; and the way a script is run there.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from workers.provisioning.commands import run_command
from workers.provisioning.manifest import write_json
from workers.provisioning.packages import BINARY

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


def tool_python(home: Path, log: Callable[[str], None]) -> Path:
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
        run_command([sys.executable, "-m", "venv", "--clear", tmp], "python -m venv")
        pip: list[str | Path] = [tmp / "bin" / "python", "-m", "pip", "install"]
        run_command([*pip, *BINARY, *TOOL_REQUIREMENTS], "pip install (conversion tools)")
        # openai-whisper is published as an sdist only: it is the one source build allowed.
        run_command([*pip, "--no-deps", *TOOL_NO_DEPS], "pip install openai-whisper")
        write_json(tmp / "mcp-media-tools.json", marker)
        if venv.exists():
            shutil.rmtree(venv)
        tmp.rename(venv)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"conversion venv ready in {time.perf_counter() - started:.1f}s")
    return python


def run_tool(python: Path, script: Path, args: Sequence[str | Path], what: str, work: Path) -> None:
    """Run one of our conversion scripts in the tool venv; its last stdout line (a JSON
    report) becomes the manifest's ``conversion`` entry."""
    # -I keeps workers/ (the script's folder) off sys.path inside the tool venv.
    report = run_command([python, "-I", "-W", "ignore", script, *args], what, cwd=work)
    lines = report.strip().splitlines()
    (work / "conversion.json").write_text(lines[-1] if lines else "{}", encoding="utf-8")
