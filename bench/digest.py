"""Document digests: pages per second through the stage against pypdfium2 called directly,
and against markitdown when the bench extra holds it (`bench.digest_markitdown`).

Both read the same generated PDFs in one run, alternating, the median of `ROUNDS`: the direct
side opens each document in this process and takes every page's text; the stage side runs
`digest_document` (the capped, long-lived reader child, the frames between them, the
Markdown written beside the original). The child is started before timing, as a worker's
slot keeps it; the start itself and the child's peak memory are recorded beside.
`python -m bench digest`.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Literal

from bench import digest_markitdown
from bench.results import record
from pipelines.digest import DigestConfig, digest_document
from pipelines.engines.reader import DocumentReader
from pipelines.results import Status
from tests.support.pdf_writer import build_pdf, text_pages

DOCUMENTS = 8
_SIDES = ("direct", "stage", "direct_cpu", "stage_cpu")
PAGES = 30  # per document: 240 pages a round
ROUNDS = 21
PEER_ROUNDS = 5  # markitdown's: it reads a PDF page some 20 times slower


def _direct(paths: list[Path]) -> int:
    import pypdfium2 as pdfium

    pages = 0
    for path in paths:
        doc = pdfium.PdfDocument(str(path))
        for index in range(len(doc)):
            page = doc[index]
            textpage = page.get_textpage()
            textpage.get_text_bounded()
            textpage.close()
            page.close()
            pages += 1
        doc.close()
    return pages


def _stage(paths: list[Path], extractor: DocumentReader, config: DigestConfig) -> tuple[int, int]:
    pages = peak = 0
    for path in paths:
        outcome = digest_document(path, config, extractor)
        if outcome.status is not Status.DONE:
            raise RuntimeError(f"{path.name}: {outcome.reason}")
        pages += int(outcome.output["pages_read"])
        peak = max(peak, int(outcome.output["peak_kib"]))
    return pages, peak


def _cpu(extractor: DocumentReader) -> float:
    """CPU seconds of this process and its idle reader child: what the work costs, apart
    from the time either waits for a core on a busy machine."""
    seconds = time.process_time()
    for pid in extractor.idle_pids():
        with open(f"/proc/{pid}/schedstat", "rb") as fh:
            seconds += int(fh.read().split()[0]) / 1e9
    return seconds


def _keep(times: list[list[float]], index: int, seconds: float) -> None:
    if index == len(times):
        times.append([])
    times[index].append(seconds)


def _total(times: list[list[float]]) -> float:
    return sum(statistics.median(each) for each in times)


def run() -> None:
    config = DigestConfig(max_pages=PAGES)
    extractor = DocumentReader()
    with tempfile.TemporaryDirectory(prefix="bench-digest-") as folder:
        paths = []
        for number in range(DOCUMENTS):
            sentence = f"Document {number} opens with a sentence of its own."
            path = Path(folder) / f"doc{number}.pdf"
            path.write_bytes(build_pdf(text_pages(PAGES, sentence, at=0), title=f"Doc {number}"))
            paths.append(path)
        started = time.perf_counter()
        _stage(paths[:1], extractor, config)  # the slot's child starts here, once
        start_s = time.perf_counter() - started
        # Each document is timed on both sides back to back (in turns, which first) and the
        # median of the rounds is kept per document: a busy machine then slows both sides,
        # and the stage's two processes are not judged by a lucky minimum of one.
        best: dict[str, list[list[float]]] = {k: [] for k in _SIDES}
        peak = 0
        try:
            for round_ in range(ROUNDS):
                for index, path in enumerate(paths):
                    for side in ("direct", "stage")[:: 1 if round_ % 2 else -1]:
                        began, cpu = time.perf_counter(), _cpu(extractor)
                        if side == "direct":
                            read = _direct([path])
                        else:
                            read, used = _stage([path], extractor, config)
                            peak = max(peak, used)
                        _keep(best[side], index, time.perf_counter() - began)
                        _keep(best[f"{side}_cpu"], index, _cpu(extractor) - cpu)
                        if read != PAGES:
                            raise RuntimeError(f"{side} read {read} pages of {PAGES}")
        finally:
            extractor.close()
        _office(Path(folder))
        _ocr(Path(folder), extractor)
        if digest_markitdown.available():
            _markitdown(paths, _total(best["stage"]), peak)
    pages = PAGES * DOCUMENTS
    ours, theirs = pages / _total(best["stage"]), pages / _total(best["direct"])
    record(
        "digest_pdf_pages_per_s",
        {
            "value": round(ours, 1),
            "unit": "pages/s",
            "baseline": round(theirs, 1),
            "baseline_of": "pypdfium2 in this process, every page's text, same files, same run",
            "ratio": round(ours / theirs, 3),
            "target": "ratio >= 0.9",
            "better": "higher",
        },
    )
    ours_cpu, theirs_cpu = pages / _total(best["stage_cpu"]), pages / _total(best["direct_cpu"])
    record(
        "digest_pdf_pages_per_cpu_s",
        {
            "value": round(ours_cpu, 1),
            "unit": "pages/CPU-s",
            "baseline": round(theirs_cpu, 1),
            "baseline_of": "pypdfium2 in this process, CPU seconds (ours: with the child's)",
            "ratio": round(ours_cpu / theirs_cpu, 3),
            "target": "report",
            "better": "higher",
        },
    )
    record(
        "digest_child_peak_memory",
        {
            "value": round(peak / 1024, 1),
            "unit": "MiB",
            "baseline": None,
            "ratio": None,
            "target": "value <= 256",
            "better": "lower",
        },
    )
    record(
        "digest_child_start_seconds",
        {
            "value": round(start_s, 3),
            "unit": "s",
            "baseline": None,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )


def _office(folder: Path) -> None:
    """DOCX and XLSX through the stage (the standard library's reader in the child): text
    characters per second and the child's peak memory, for the record (no baseline here:
    python-docx and openpyxl are no dependency; see the choice in pipelines/engines/office)."""
    from tests.support import office_writer

    lines = [
        f"Paragraph {n} of the measured document, with some words to read." for n in range(4000)
    ]
    files = {
        "docx": office_writer.docx(lines, title="Measured"),
        "xlsx": office_writer.xlsx({"Rows": [[line, n, "note"] for n, line in enumerate(lines)]}),
    }
    extractor = DocumentReader()
    try:
        for kind, data in files.items():
            path = folder / f"measured.{kind}"
            path.write_bytes(data)
            times, chars, peak = [], 0, 0
            for _ in range(ROUNDS):
                began = time.perf_counter()
                outcome = digest_document(path, DigestConfig(), extractor)
                times.append(time.perf_counter() - began)
                chars, peak = int(outcome.output["chars"]), int(outcome.output["peak_kib"])
            record(
                f"digest_{kind}_chars_per_s",
                {
                    "value": round(chars / statistics.median(times)),
                    "unit": "chars/s",
                    "baseline": None,
                    "ratio": None,
                    "target": "report",
                    "better": "higher",
                },
            )
            record(
                f"digest_{kind}_child_peak_memory",
                {
                    "value": round(peak / 1024, 1),
                    "unit": "MiB",
                    "baseline": None,
                    "ratio": None,
                    "target": "value <= 256",
                    "better": "lower",
                },
            )
    finally:
        extractor.close()


def _markitdown(pdfs: list[Path], seconds: float, peak: int) -> None:
    """markitdown on the same PDFs: ours is the value, markitdown the baseline; reported."""
    peer = digest_markitdown.convert(pdfs, PEER_ROUNDS)
    pages = PAGES * len(pdfs)
    sides: tuple[tuple[str, float, float, str, Literal["higher", "lower"]], ...] = (
        ("pages_per_s", pages / seconds, pages / peer.seconds, "pages/s", "higher"),
        ("peak_memory", peak / 1024, peer.peak_kib / 1024, "MiB", "lower"),
    )
    for name, ours, theirs, unit, better in sides:
        record(
            f"digest_pdf_{name}_vs_markitdown",
            {
                "value": round(ours, 1),
                "unit": unit,
                "baseline": round(theirs, 1),
                "baseline_of": "markitdown 0.1.9 (pdfminer.six) in a process of its own; "
                "memory: its VmHWM beside our reader child's",
                "ratio": round(ours / theirs, 3),
                "target": "report",
                "better": better,
            },
        )


OCR_PAGES = 2
OCR_ROUNDS = 3


def _ocr(folder: Path, extractor: DocumentReader) -> None:
    """Seconds per scanned page (no text layer) read by OCR in the child, once its OCR engine
    is loaded (the first document loads it, outside the timing; the median of the rounds)."""
    from tests.support.pdf_writer import scanned_pdf

    config = DigestConfig(ocr_pages=OCR_PAGES)
    seconds = []
    for round_ in range(OCR_ROUNDS + 1):
        lines = [
            f"Scanned page {n} of round {round_}: the invoice was paid on Monday." for n in range(8)
        ]
        path = folder / f"scanned{round_}.pdf"
        path.write_bytes(scanned_pdf([], [lines] * OCR_PAGES))
        began = time.perf_counter()
        outcome = digest_document(path, config, extractor)
        took = time.perf_counter() - began
        if outcome.status is not Status.DONE or len(outcome.output["ocr_pages"]) != OCR_PAGES:
            raise RuntimeError(f"{path.name}: OCR read {outcome.output or outcome.reason}")
        if round_:
            seconds.append(took / OCR_PAGES)
    record(
        "digest_ocr_seconds_per_scanned_page",
        {
            "value": round(statistics.median(seconds), 3),
            "unit": "s/page",
            "baseline": None,
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
