"""Rewrite a model's 1-D convolutions as 2-D ones of height 1, and check it computes the same.

Run only as a script by the isolated conversion venv that ``workers.provisioning.models``
builds (onnx, onnxruntime, numpy); runtime code never imports this module::

    python conv_layout.py --model IN.onnx --out OUT.onnx --check piper
    python conv_layout.py --model IN.onnx --out OUT.onnx --check kokoro --voices voices.bin \
        --dequantize

Why: onnxruntime's CPU provider runs 2-D convolutions in its blocked NCHWc layout, with
kernels for the machine's vector width, but 1-D ones through im2col and a GEMM. A piper
voice's decoder is a stack of 1-D convolutions over every output sample: as 2-D ones (weight
``[out, in, k]`` -> ``[out, in, 1, k]``, input unsqueezed to ``[n, c, 1, t]`` and the output
squeezed back) the same weights ran a sentence 1.17-1.20x faster on one thread here, with
samples within 2e-5 of the original's. The script prints a JSON report on stdout: how many
convolutions it rewrote and how far the output moved on a fixed input (largest sample
difference, and `spectral_snr_db`, which must reach ``--min-snr-db`` or the build fails).

``--dequantize`` first turns dynamically quantized convolutions (``DynamicQuantizeLinear``
-> ``ConvInteger`` -> bias add -> ``Cast`` -> scale, as onnxruntime's ``quantize_dynamic``
writes them) back into float ``Conv`` nodes on the dequantized int8 weights. Kokoro's int8
export spends most of a sentence there: its uint8 x uint8 ``ConvInteger`` has no fast kernel,
and 62 % of a run went to it. The weights keep their int8 values; only the activations stay
float instead of being quantized at every convolution, so the output moves (the check then
bounds its length and spectral distance against the int8 model's, and the 2-D step's alone).

Heavy modules are loaded with importlib and typed as ``Any`` so that mypy --strict checks
this file without onnx installed.
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
_ATTRIBUTES = {
    "kernel_shape",
    "pads",
    "strides",
    "dilations",
    "group",
    "output_padding",
    "auto_pad",
}


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


def _single(consumers: dict[str, list[Any]], name: str) -> Any:
    found = consumers.get(name, [])
    if len(found) != 1:
        raise LayoutError(f"{name} feeds {len(found)} nodes, expected one")
    return found[0]


def dequantize_convolutions(model: Any) -> int:
    """Replace, in place, each dynamically quantized convolution by a float ``Conv``."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    weights = {t.name: t for t in graph.initializer}

    def constant(name: str) -> Any:
        if name not in weights:
            raise LayoutError(f"{name} is not a constant")
        return numpy_helper.to_array(weights[name])

    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type != "ConvInteger":
            continue
        quantize = producer.get(node.input[0])
        if quantize is None or quantize.op_type != "DynamicQuantizeLinear":
            raise LayoutError(f"{node.name}: input is not dynamically quantized")
        chain = [node]
        following = _single(consumers, node.output[0])
        bias: list[str] = []
        if following.op_type == "Add":  # the bias, quantized as floor(bias / scale)
            reshape = producer[following.input[1]]
            cast = producer[reshape.input[0]]
            floor = producer[cast.input[0]]
            divide = producer[floor.input[0]]
            if [reshape.op_type, cast.op_type, floor.op_type, divide.op_type] != [
                "Reshape",
                "Cast",
                "Floor",
                "Div",
            ] or divide.input[0] not in weights:
                raise LayoutError(f"{node.name}: bias is not floor(constant / scale)")
            bias = [divide.input[0]]
            chain.append(following)
            following = _single(consumers, following.output[0])
        scale = _single(consumers, following.output[0])
        if following.op_type != "Cast" or scale.op_type != "Mul":
            raise LayoutError(f"{node.name}: output is not cast and scaled")
        chain += [following, scale]
        product = producer.get(scale.input[1])
        weight_scale = [n for n in (product.input if product else ()) if n in weights]
        if product is None or product.op_type != "Mul" or len(weight_scale) != 1:
            raise LayoutError(f"{node.name}: scale is not input scale x weight scale")
        values = constant(node.input[1]).astype(np.float32)
        per_output = (-1,) + (1,) * (values.ndim - 1)  # a scale per output channel, or one
        zero = constant(node.input[3]) if len(node.input) > 3 else np.zeros(())
        zero = zero.astype(np.float32).reshape(per_output if zero.ndim else ())
        factor = constant(weight_scale[0]).astype(np.float32)
        real = ((values - zero) * factor.reshape(per_output if factor.ndim else ())).astype(
            np.float32
        )
        name = f"{node.input[1]}__float"
        graph.initializer.append(numpy_helper.from_array(real, name))
        conv = helper.make_node(
            "Conv", [quantize.input[0], name, *bias], [scale.output[0]], name=node.name
        )
        conv.attribute.extend(node.attribute)
        replaced[id(node)] = conv
        dropped.update(id(n) for n in chain)
    kept = [replaced.get(id(n), n) for n in graph.node if id(n) in replaced or id(n) not in dropped]
    _keep_live(graph, kept)
    return len(replaced)


def _keep_live(graph: Any, nodes: list[Any]) -> None:
    """Set the graph's nodes to those of `nodes` something still reads; drop dead constants."""
    wanted = {o.name for o in graph.output}
    while True:
        read = set(wanted).union(*(n.input for n in nodes))
        live = [n for n in nodes if any(o in read for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    del graph.node[:]
    graph.node.extend(nodes)
    read = set().union(*(n.input for n in nodes))
    constants = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(constants)


def _piper_feeds(session: Any, voices: Path | None) -> dict[str, Any]:
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


def _kokoro_feeds(session: Any, voices: Path | None) -> dict[str, Any]:
    """100 fixed symbols spoken with the first voice's style for that length, at speed 1."""
    if voices is None:
        raise LayoutError("the kokoro check needs --voices")
    count = 100
    style = np.fromfile(voices, dtype=np.float32, count=(count + 1) * 256)[-256:]
    ids = np.random.default_rng(0).integers(1, 170, size=count, dtype=np.int64)
    names = [i.name for i in session.get_inputs()]
    return {
        names[0]: np.concatenate([[0], ids, [0]])[None, :],
        names[1]: style[None, :],
        names[2]: np.array([1.0], dtype=np.float32),
    }


_CHECKS = {"piper": _piper_feeds, "kokoro": _kokoro_feeds}


def _run(path: Path, check: str, voices: Path | None) -> tuple[Any, float]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = _CHECKS[check](session, voices)
    session.run(None, feeds)  # the first run pays for allocation
    started = time.perf_counter()
    out = session.run(None, feeds)[0]
    return np.asarray(out, dtype=np.float32).reshape(-1), time.perf_counter() - started


def _loudness(samples: Any) -> float:
    return float(np.sqrt(np.mean(np.square(samples)))) if samples.size else 0.0


def spectral_snr_db(reference: Any, other: Any) -> float:
    """How close two outputs sound: the energy of `reference`'s magnitude spectrogram over
    that of the difference between the two (1024-sample frames, hop 256). Phase is left out:
    Kokoro integrates its pitch into a sine's phase, so rounding a kernel changes in another
    order moves samples late in a sentence without changing what is heard."""
    if reference.size != other.size or reference.size < 1024:
        return float("-inf")

    def magnitudes(x: Any) -> Any:
        frames = np.lib.stride_tricks.sliding_window_view(x, 1024)[::256] * np.hanning(1024)
        return np.abs(np.fft.rfft(frames, axis=1))

    want, got = magnitudes(reference), magnitudes(other)
    noise = float(np.square(want - got).sum())
    return float(10 * np.log10(float(np.square(want).sum()) / noise)) if noise else float("inf")


def rewrite(
    source: Path,
    out: Path,
    check: str,
    min_snr_db: float,
    *,
    dequantize: bool = False,
    voices: Path | None = None,
) -> dict[str, Any]:
    """Rewrite `source` into `out`; each step is checked on a fixed input, or LayoutError."""
    model = onnx.load(str(source))
    report: dict[str, Any] = {}
    original, original_s = _run(source, check, voices)
    before = original
    if dequantize:
        report["convolutions_dequantized"] = dequantize_convolutions(model)
        if not report["convolutions_dequantized"]:
            raise LayoutError(f"{source} has no dynamically quantized convolution")
        flat = out.with_name(f".{out.name}.1d")
        onnx.save(model, str(flat))
        before, _ = _run(flat, check, voices)
        flat.unlink()
        length = before.size / max(original.size, 1)
        report["float_vs_int8"] = {
            "length_ratio": length,
            "loudness_ratio": _loudness(before) / max(_loudness(original), 1e-9),
            "spectral_snr_db": spectral_snr_db(original, before),
        }
        if not (0.95 <= length <= 1.05 and report["float_vs_int8"]["spectral_snr_db"] >= 10):
            raise LayoutError(f"float convolutions changed the output: {report}")
    count = convolutions_to_2d(model)
    if count == 0:
        raise LayoutError(f"{source} has no 1-D convolution with constant weights")
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    after, after_s = _run(out, check, voices)
    if before.shape != after.shape:
        raise LayoutError(f"output shape changed: {before.shape} -> {after.shape}")
    snr = spectral_snr_db(before, after)
    if snr < min_snr_db:
        raise LayoutError(f"2-D convolutions changed the output: spectral SNR {snr:.1f} dB")
    return report | {
        "convolutions_2d": count,
        "max_abs_diff_2d": float(np.abs(before - after).max()) if before.size else 0.0,
        "spectral_snr_db_2d": snr,
        "check_seconds_before": round(original_s, 3),
        "check_seconds_after": round(after_s, 3),
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check", choices=sorted(_CHECKS), required=True)
    parser.add_argument("--min-snr-db", type=float, default=25.0)
    parser.add_argument("--dequantize", action="store_true")
    parser.add_argument("--voices", type=Path, help="voices.bin, for the kokoro check")
    args = parser.parse_args(argv)
    try:
        report = rewrite(
            args.model,
            args.out,
            args.check,
            args.min_snr_db,
            dequantize=args.dequantize,
            voices=args.voices,
        )
    except (LayoutError, KeyError, ValueError) as exc:
        print(f"conv_layout: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
