"""OCR through rapidocr-onnxruntime (PP-OCRv4 det/rec/cls ONNX models ship in its wheel)."""

from __future__ import annotations

import importlib
import logging
import threading
from typing import TYPE_CHECKING, Any

from pipelines.errors import ConfigError
from pipelines.vision import DegradedReason, ProviderRejected

if TYPE_CHECKING:
    from PIL import Image

# rapidocr's get_logger() attaches its own DEBUG StreamHandler to these loggers; left alone
# they print to stderr and duplicate into the root logger of a Celery worker.
_RAPIDOCR_LOGGERS = ("RapidOCR", "OrtInferSession")


class RapidOcrReader:
    """A `TextReader`. The engine loads on first use (or `load()`), once, behind a lock."""

    def __init__(
        self,
        *,
        threads: int | None = None,
        det_max_side: int = 1280,
        min_score: float = 0.5,
    ) -> None:
        self._threads = threads
        self._det_max_side = det_max_side
        self._min_score = min_score
        self._engine: Any = None
        self._load_lock = threading.Lock()
        # One inference at a time: CPU-bound anyway, and RapidOCR keeps per-call state.
        self._run_lock = threading.Lock()

    def load(self) -> None:
        with self._load_lock:
            if self._engine is not None:
                return
            try:
                onnxruntime = importlib.import_module("onnxruntime")  # no type stubs
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as exc:
                raise ConfigError("local vision needs rapidocr-onnxruntime installed") from exc
            # No telemetry events from our sessions. The device-id and session files are
            # written at import unless the process edge set ORT_DISABLE_TELEMETRY (see
            # workers.core.confinement.confine_process).
            onnxruntime.disable_telemetry_events()
            options: dict[str, Any] = {
                # Detection on the image's own scale: the default "min 736" upscales wide
                # banners several-fold and costs ~0.6 s instead of ~0.1 s on 900x260.
                "det_limit_type": "max",
                "det_limit_side_len": self._det_max_side,
                "text_score": self._min_score,
            }
            if self._threads:
                options["intra_op_num_threads"] = self._threads
            engine = RapidOCR(**options)
            for name in _RAPIDOCR_LOGGERS:
                logger = logging.getLogger(name)
                for handler in list(logger.handlers):
                    logger.removeHandler(handler)
                logger.setLevel(logging.WARNING)
            self._engine = engine

    def read_lines(self, image: Image.Image) -> list[str]:
        self.load()
        try:
            with self._run_lock:
                result, _elapsed = self._engine(image.convert("RGB"))
        except Exception as exc:  # onnxruntime and cv2 raise their own types
            raise ProviderRejected(
                DegradedReason.PROVIDER_ERROR, f"OCR failed: {type(exc).__name__}: {exc}"
            ) from exc
        return _to_lines(result or [])


def _to_lines(result: list[Any]) -> list[str]:
    """Join boxes that share a text line (by vertical centre), left to right."""
    boxes: list[tuple[float, float, float, str]] = []
    for box, text, _score in result:
        ys = [point[1] for point in box]
        xs = [point[0] for point in box]
        top, bottom = min(ys), max(ys)
        boxes.append(((top + bottom) / 2, bottom - top, min(xs), str(text).strip()))
    boxes.sort()
    lines: list[list[tuple[float, float, float, str]]] = []
    for item in boxes:
        if lines and abs(item[0] - lines[-1][0][0]) < 0.5 * max(item[1], lines[-1][0][1]):
            lines[-1].append(item)
        else:
            lines.append([item])
    return [" ".join(t for *_, t in sorted(line, key=lambda b: b[2]) if t) for line in lines]
