"""Scanned PDF pages through OCR, in the document reader child.

A page whose text layer is empty but which shows an image is rendered by PDFium and read
by our OCR engine (`pipelines.engines.ocr`, rapidocr-onnxruntime), at most `ocr_pages`
pages per document. The engine loads on the first scanned page a child meets and stays for
the child's later documents (loading costs seconds; a page, about one). It loads after the
child's caps: with telemetry off by the process edge (`ORT_DISABLE_TELEMETRY`, inherited)
onnxruntime writes no file, which the child's zero file-size limit would stop anyway. Its
libraries and models take about 600 MiB of address space and a page's inference 350 MiB
more (550 MiB resident at the peak), past the child's default budget: the child's hard
limit holds `ADDRESS_SPACE` more, and loading the engine raises the soft limit to it.
"""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.engines.ocr import RapidOcrReader

# 108 dpi and detection within 1280 pixels: a 10 pt line is about 15 pixels high, which
# PP-OCR still reads, and the engine's peak stays near 900 MiB of address space with one
# thread (144 dpi and 1600 pixels took 1.2 GiB, over the child's default budget).
RENDER_SCALE = 1.5
DET_MAX_SIDE = 1280
THREADS = 1  # one page at a time per worker slot: the slots, not the engine, use the cores
ADDRESS_SPACE = 1024 * 1024 * 1024  # what the engine may add to the child's budget
_ENGINE: list[RapidOcrReader] = []  # the child's one engine, once loaded


def has_image(page: object) -> bool:
    import pypdfium2.raw as raw

    objects = page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE], max_depth=2)  # type: ignore[attr-defined]
    return next(iter(objects), None) is not None


def read_scanned(page: object) -> str:
    """The page's text as OCR reads it from its rendering; "" when the engine is missing
    (the documents extra without OCR) or fails on this page."""
    from pipelines.engines.ocr import RapidOcrReader
    from pipelines.errors import ConfigError
    from pipelines.vision import ProviderRejected

    if not _ENGINE:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        _ENGINE.append(RapidOcrReader(det_max_side=DET_MAX_SIDE, threads=THREADS))
    bitmap = page.render(scale=RENDER_SCALE)  # type: ignore[attr-defined]
    try:
        image = bitmap.to_pil()
        return "\n".join(line for line in _ENGINE[0].read_lines(image) if line)
    except (ConfigError, ProviderRejected):
        return ""
    finally:
        bitmap.close()
