"""Rewrite a model's 1-D convolutions as 2-D ones of height 1, and check it computes the same.

Run only as a script by the isolated conversion venv that ``workers.provisioning.models``
builds (onnx, onnxruntime, numpy); runtime code never imports this module::

    python conv_layout.py --model IN.onnx --out OUT.onnx --check piper

Why: onnxruntime's CPU provider runs 2-D convolutions in its blocked NCHWc layout, with
kernels for the machine's vector width, but 1-D ones through im2col and a GEMM. A piper
voice's decoder is a stack of 1-D convolutions over every output sample: as 2-D ones (weight
``[out, in, k]`` -> ``[out, in, 1, k]``, input unsqueezed to ``[n, c, 1, t]`` and the output
squeezed back) the same weights ran a sentence 1.17-1.20x faster on one thread here, with
samples within 2e-5 of the original's. The script prints a JSON report on stdout: how many
convolutions it rewrote and the largest sample difference on a fixed input, which must stay
under ``--tolerance`` or the build fails. Heavy modules are loaded with importlib and typed as
``Any`` so that mypy --strict checks this file without onnx installed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

np: Any = importlib.import_module("numpy")
onnx: Any = importlib.import_module("onnx")
numpy_helper: Any = importlib.import_module("onnx.numpy_helper")
helper: Any = importlib.import_module("onnx.helper")
ort: Any = importlib.import_module("onnxruntime")

_AXES = "conv_layout_axis_2"
_ATTRIBUTES = {"kernel_shape", "pads", "strides", "dilations", "group", "output_padding"}


class LayoutError(RuntimeError):
    """The model is not one this rewrite understands, or the rewrite changed its output."""


def _attributes_2d(node: Any, kernel: int) -> dict[str, Any]:
    """A 1-D convolution's attributes for the same convolution over ``[n, c, 1, t]``."""
    found = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    unknown = set(found) - _ATTRIBUTES
    if unknown or found.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise LayoutError(f"{node.name}: attributes {sorted(unknown)} not rewritten")
    begin, end = found.get("pads", [0, 0])
    out: dict[str, Any] = {
        "kernel_shape": [1, found.get("kernel_shape", [kernel])[0]],
        "pads": [0, begin, 0, end],
        "strides": [1, found.get("strides", [1])[0]],
        "dilations": [1, found.get("dilations", [1])[0]],
        "group": found.get("group", 1),
    }
    if "output_padding" in found:
        out["output_padding"] = [0, found["output_padding"][0]]
    return out


def convolutions_to_2d(model: Any) -> int:
    """Rewrite, in place, every Conv/ConvTranspose whose weight is a 3-D initializer."""
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    nodes: list[Any] = []
    count = 0
    for node in graph.node:
        weight = weights.get(node.input[1]) if len(node.input) > 1 else None
        if node.op_type not in ("Conv", "ConvTranspose") or weight is None or len(weight.dims) != 3:
            nodes.append(node)
            continue
        array = numpy_helper.to_array(weight)
        weight.CopyFrom(numpy_helper.from_array(array[:, :, None, :], weight.name))
        wide_in = f"{node.input[0]}__2d_{count}"
        wide_out = f"{node.output[0]}__2d"
        nodes.append(helper.make_node("Unsqueeze", [node.input[0], _AXES], [wide_in]))
        nodes.append(
            helper.make_node(
                node.op_type,
                [wide_in, *node.input[1:]],
                [wide_out],
                name=node.name,
                **_attributes_2d(node, int(array.shape[2])),
            )
        )
        nodes.append(helper.make_node("Squeeze", [wide_out, _AXES], [node.output[0]]))
        count += 1
    if count:
        graph.initializer.append(numpy_helper.from_array(np.array([2], dtype=np.int64), _AXES))
        del graph.node[:]
        graph.node.extend(nodes)
    return count


def _piper_feeds(session: Any) -> dict[str, Any]:
    """A fixed 200-symbol clause at noise scales 0: the voice's output is then deterministic."""
    ids = np.random.default_rng(0).integers(1, 100, size=(1, 200), dtype=np.int64)
    feeds = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
    }
    if "sid" in {i.name for i in session.get_inputs()}:
        feeds["sid"] = np.array([0], dtype=np.int64)
    return feeds


_CHECKS = {"piper": _piper_feeds}


def _run(path: Path, check: str) -> tuple[Any, float]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = _CHECKS[check](session)
    session.run(None, feeds)  # the first run pays for allocation
    started = time.perf_counter()
    out = session.run(None, feeds)[0]
    return np.asarray(out, dtype=np.float32).reshape(-1), time.perf_counter() - started


def rewrite(source: Path, out: Path, check: str, tolerance: float) -> dict[str, Any]:
    model = onnx.load(str(source))
    count = convolutions_to_2d(model)
    if count == 0:
        raise LayoutError(f"{source} has no 1-D convolution with constant weights")
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    before, before_s = _run(source, check)
    after, after_s = _run(out, check)
    if before.shape != after.shape:
        raise LayoutError(f"output shape changed: {before.shape} -> {after.shape}")
    gap = float(np.abs(before - after).max()) if before.size else 0.0
    if gap > tolerance:
        raise LayoutError(f"outputs differ by {gap:.3g} > {tolerance}")
    return {
        "convolutions_2d": count,
        "max_abs_diff": gap,
        "check_seconds_1d": round(before_s, 3),
        "check_seconds_2d": round(after_s, 3),
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check", choices=sorted(_CHECKS), required=True)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args(argv)
    try:
        report = rewrite(args.model, args.out, args.check, args.tolerance)
    except (LayoutError, KeyError, ValueError) as exc:
        print(f"conv_layout: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
