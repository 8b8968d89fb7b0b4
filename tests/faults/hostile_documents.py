"""Hostile documents through the digest stage: figures for `make hostile`, not assertions.

Each hostile kind of the corpus (`tests/corpus/documents.py`: a page bomb, an encrypted and
a truncated PDF, a DOCX zip bomb, an XML entity bomb, too many members) is digested `rounds`
times by one document reader (its real capped children), each followed by a good PDF. For
each kind: the outcomes counted, whether every good document after it was still digested,
seconds per document, this process's RSS before and after (flat: nothing piles up in the
worker) and the peak RSS of any reader child, sampled while it reads.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from pipelines.digest import DigestConfig, digest_document
from pipelines.engines.registry import document_extractor
from pipelines.results import Status
from tests.corpus import documents

SAMPLE_EVERY = 0.02  # seconds between two looks at the children's memory


def _kib(pid: str, field: str) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0  # it ended between the listing and the look
    for line in status.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _readers() -> list[str]:
    """This process's reader children (not one just forked: it shows this process's RSS)."""
    found: list[str] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            found += (task / "children").read_text().split()
        except OSError:
            continue
    return [pid for pid in found if _is_reader(pid)]


def _is_reader(pid: str) -> bool:
    try:
        return b"reader_child" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class ChildPeak:
    """The highest RSS any child of this process showed while sampling ran."""

    def __init__(self) -> None:
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ChildPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            for pid in _readers():
                self.peak_kib = max(self.peak_kib, _kib(pid, "VmRSS"))


def measure(rounds: int) -> dict[str, dict[str, object]]:
    reader = document_extractor()
    config = DigestConfig()
    results: dict[str, dict[str, object]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-media-documents-") as folder:
            base = Path(folder)
            good = base / "good.pdf"
            good.write_bytes(documents.good_pdf())
            for kind in documents.CASES:
                hostile = base / kind.file
                hostile.write_bytes(kind.build())
                outcomes: Counter[str] = Counter()
                good_after = 0
                before = _kib("self", "VmRSS")
                started = time.perf_counter()
                with ChildPeak() as children:
                    for _ in range(rounds):
                        got = digest_document(hostile, config, reader)
                        code = got.outcome.value if got.outcome else "done"
                        outcomes[code if got.status is not Status.DONE else "done"] += 1
                        after = digest_document(good, config, reader)
                        good_after += after.status is Status.DONE
                seconds = time.perf_counter() - started
                results[kind.name] = {
                    "rounds": rounds,
                    "outcomes": dict(outcomes),
                    "expected": kind.outcome,
                    "good_after": good_after,
                    "seconds_per_document": round(seconds / (2 * rounds), 3),
                    "rss_before_mb": round(before / 1024, 1),
                    "rss_after_mb": round(_kib("self", "VmRSS") / 1024, 1),
                    "child_peak_mb": round(children.peak_kib / 1024, 1),
                }
    finally:
        reader.close()
    return results


def lines(results: dict[str, dict[str, object]]) -> list[str]:
    return [
        f"{name:32} {r['outcomes']} (expected {r['expected']}), good after "
        f"{r['good_after']}/{r['rounds']}, {r['seconds_per_document']} s/doc, "
        f"rss {r['rss_before_mb']}->{r['rss_after_mb']} MiB, child peak {r['child_peak_mb']} MiB"
        for name, r in results.items()
    ]


if __name__ == "__main__":
    for said in lines(measure(3)):
        print(said)
