"""onnxruntime sessions as every engine here opens them: CPU, a fixed number of threads."""

from __future__ import annotations

from pathlib import Path

import onnxruntime

from pipelines.errors import ConfigError


def cpu_session(model: Path, threads: int = 1) -> onnxruntime.InferenceSession:
    """`threads` for the operators themselves, one for the graph; a file onnxruntime cannot
    load is a `ConfigError` naming it."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        return onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ConfigError(f"{model} cannot be loaded by onnxruntime: {exc}") from None
