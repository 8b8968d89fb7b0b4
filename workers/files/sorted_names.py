"""Names in sorted order from a listing that gives them in any order (a folder), in bounded
memory: an external merge sort.

A folder of a million files is listed in the file system's own order; sorting the names in
memory would hold every one of them. Instead runs of `RUN` names are sorted and written to
a private temporary folder, and the runs are merged as they are read, `FAN_IN` at a time
(a merge of more runs first merges them into fewer). A listing of `RUN` names or fewer is
sorted in memory and nothing is written.
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path

RUN = 20_000  # names sorted in memory at once (about 2.5 MB of 70-character names)
FAN_IN = 64  # runs merged at once (one open file and one name each)


def sorted_names(names: Iterable[str], *, run: int = RUN, fan_in: int = FAN_IN) -> Iterator[str]:
    """`names` (none holding a newline) in sorted order, duplicates kept."""
    batch: list[str] = []
    source = iter(names)
    for name in source:
        batch.append(name)
        if len(batch) >= run:
            break
    else:
        batch.sort()
        yield from batch
        return
    with tempfile.TemporaryDirectory(prefix="mcp-media-sort-") as tmp:
        runs = [_spill(batch, Path(tmp), 0)]
        batch = []
        for name in source:
            batch.append(name)
            if len(batch) >= run:
                runs.append(_spill(batch, Path(tmp), len(runs)))
                batch = []
        if batch:
            runs.append(_spill(batch, Path(tmp), len(runs)))
        del batch
        made = len(runs)
        while len(runs) > fan_in:
            groups = [runs[i : i + fan_in] for i in range(0, len(runs), fan_in)]
            runs = []
            for group in groups:
                target = Path(tmp) / f"run-{made}"
                made += 1
                with target.open("w", encoding="utf-8") as out:
                    out.writelines(f"{name}\n" for name in _merged(group))
                for done in group:
                    done.unlink()
                runs.append(target)
        yield from _merged(runs)


def _spill(batch: list[str], folder: Path, n: int) -> Path:
    batch.sort()
    target = folder / f"run-{n}"
    with target.open("w", encoding="utf-8") as out:
        out.writelines(f"{name}\n" for name in batch)
    batch.clear()
    return target


def _merged(runs: list[Path]) -> Iterator[str]:
    with ExitStack() as stack:
        files = [stack.enter_context(path.open(encoding="utf-8")) for path in runs]
        for line in heapq.merge(*files):
            yield line[:-1]
