"""markitdown (Microsoft's converter; pdfminer.six for PDF) on the PDFs `bench.digest`
reads, side by side: seconds per file and the peak memory of the process converting them.
Reported, not targeted: it converts more (tables, links) and reads no scanned page. The
DOCX and XLSX the bench writes are the minimal packages our reader needs: markitdown's
converters (mammoth, openpyxl) refuse them, so those are not compared.

It runs in a child process of its own, so its peak memory (VmHWM of that whole process, as
ours is of the reader child's whole process) is its alone; the first file is converted once
before timing, as a long-lived worker would have done.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_CHILD = r"""
import json, sys, time
from markitdown import MarkItDown

rounds, paths = int(sys.argv[1]), sys.argv[2:]
converter = MarkItDown(enable_plugins=False)
converter.convert(paths[0])
times = {path: [] for path in paths}
for _ in range(rounds):
    for path in paths:
        began = time.perf_counter()
        chars = len(converter.convert(path).text_content)
        times[path].append(time.perf_counter() - began)
with open("/proc/self/status") as fh:
    peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
print(json.dumps({"times": times, "peak_kib": peak, "chars": chars}))
"""


@dataclass(frozen=True, slots=True)
class Converted:
    seconds: float  # the sum over the files of each file's median seconds
    peak_kib: int


def available() -> bool:
    try:
        import markitdown  # noqa: F401
    except ImportError:
        return False
    return True


def convert(paths: list[Path], rounds: int) -> Converted:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(rounds), *map(str, paths)],
        capture_output=True,
        check=False,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"markitdown failed: {done.stderr.decode(errors='replace')[-1000:]}")
    answer = json.loads(done.stdout)
    seconds = sum(statistics.median(each) for each in answer["times"].values())
    return Converted(seconds, int(answer["peak_kib"]))
