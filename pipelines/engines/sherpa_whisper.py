"""The sherpa-onnx copy of a whisper folder `models prepare` built: same weights, sherpa's
stacked layout, without torch or the onnx package, made beside the folder the first time
sherpa-onnx is asked to run it (`layout_copy`).

Our export hands each layer its own tensors (``cross_k0..``, ``past_k0..`` -> ``new_k0..``);
sherpa-onnx's whisper runs an encoder that returns ``n_layer_cross_k/v`` ``[layers, 1, T,
d]`` and a decoder that takes ``tokens, in_n_layer_self_k/v_cache [layers, 1, n_text_ctx,
d], n_layer_cross_k/v, offset`` and returns ``logits, out_n_layer_self_k/v_cache``, in
that order. This module wraps our graphs in small adapters (Gather, Slice, Reshape,
Transpose, Concat) written straight into the protobuf, so the weights are untouched.

The copy holds ``<name>-encoder.int8.onnx``, ``<name>-decoder.int8.onnx`` and
``<name>-tokens.txt``, the names sherpa-onnx's release folders use.
"""

from __future__ import annotations

import logging
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pipelines.errors import ConfigError
from pipelines.onnx_metadata import encode_varint, read_onnx_metadata, varint_at

log = logging.getLogger("mcp_media.speech")
_LEN, _VARINT = 2, 0
_FLOAT, _INT64 = 1, 7  # TensorProto.DataType
_ATTR_INT, _ATTR_INTS = 2, 7  # AttributeProto.AttributeType
_GRAPH = 7  # ModelProto.graph
_NODE, _INITIALIZER, _INPUT, _OUTPUT = 1, 5, 11, 12  # GraphProto fields


def _key(field: int, wire: int) -> bytes:
    return encode_varint(field << 3 | wire)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, _LEN) + encode_varint(len(payload)) + payload


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + encode_varint(value & (2**64 - 1))


def _attr(name: str, value: int | list[int]) -> bytes:
    if isinstance(value, int):
        return _bytes(5, _str(1, name) + _int(20, _ATTR_INT) + _int(3, value))
    return _bytes(5, _str(1, name) + _int(20, _ATTR_INTS) + b"".join(_int(8, v) for v in value))


def _node(op: str, inputs: list[str], outputs: list[str], **attrs: int | list[int]) -> bytes:
    body = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    body += _str(3, f"sherpa_{outputs[0]}") + _str(4, op)
    body += b"".join(_attr(name, value) for name, value in attrs.items())
    return _bytes(_NODE, body)


def _const(name: str, values: list[int], scalar: bool = False) -> bytes:
    dims = b"" if scalar else _int(1, len(values))
    raw = struct.pack(f"<{len(values)}q", *values)
    return _bytes(_INITIALIZER, dims + _int(2, _INT64) + _str(8, name) + _bytes(9, raw))


def _value(field: int, name: str, elem: int, dims: list[int | str]) -> bytes:
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in dims)
    tensor = _int(1, elem) + _bytes(2, shape)
    return _bytes(field, _str(1, name) + _bytes(2, _bytes(1, tensor)))


def _fields(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """(field, whole entry, payload) of each top-level field of a message."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = varint_at(data, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, pos = varint_at(data, pos)
            yield field, data[start:pos], b""
        elif wire == _LEN:
            length, pos = varint_at(data, pos)
            yield field, data[start : pos + length], data[pos : pos + length]
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            yield field, data[start:pos], b""
        else:
            raise ConfigError(f"not an ONNX protobuf (wire type {wire})")


def _name(payload: bytes) -> str:
    for field, _, value in _fields(payload):
        if field == 1:
            return value.decode()
    return ""


def _rewrite(
    src: Path, dst: Path, head: list[bytes], tail: list[bytes], inputs: list[bytes | str],
    outputs: list[bytes | str],
) -> None:  # fmt: skip
    """Copy `src` to `dst` with nodes before and after its own, and its graph inputs and
    outputs replaced (a str keeps the original entry of that name, in that place)."""
    model = src.read_bytes()
    out = bytearray()
    for field, entry, payload in _fields(model):
        if field != _GRAPH:
            out += entry
            continue
        original = {(f, _name(p)): e for f, e, p in _fields(payload) if f in (_INPUT, _OUTPUT)}
        graph = bytearray(b"".join(head))
        for f, e, _p in _fields(payload):
            if f == _NODE:
                graph += e
        graph += b"".join(tail)
        for f, e, _p in _fields(payload):
            if f not in (_NODE, _INPUT, _OUTPUT):
                graph += e
        for field_no, wanted in ((_INPUT, inputs), (_OUTPUT, outputs)):
            for item in wanted:
                graph += original[(field_no, item)] if isinstance(item, str) else item
        out += _bytes(_GRAPH, bytes(graph))
    dst.write_bytes(bytes(out))


def export(folder: Path, out: Path) -> Path:
    """Write the sherpa-onnx copy of `folder` (a `models prepare` whisper) into `out`."""
    encoder, decoder = folder / "encoder.int8.onnx", folder / "decoder.int8.onnx"
    for path in (encoder, decoder, folder / "tokens.txt", folder / "mel_filters.npy"):
        if not path.is_file():
            raise ConfigError(
                f"{folder} is not a whisper folder of `models prepare`: no {path.name}"
            )
    meta = read_onnx_metadata(encoder)
    layers, heads = int(meta["n_text_layer"]), int(meta["n_text_head"])
    width, context = int(meta["n_text_state"]), int(meta["n_text_ctx"])
    out.mkdir(parents=True, exist_ok=True)
    name = folder.name
    _encoder(encoder, out / f"{name}-encoder.int8.onnx", layers, heads, width)
    _decoder(decoder, out / f"{name}-decoder.int8.onnx", layers, heads, width, context)
    shutil.copyfile(folder / "tokens.txt", out / f"{name}-tokens.txt")
    return out


def _encoder(src: Path, dst: Path, layers: int, heads: int, width: int) -> None:
    consts = [_const("sh_rows", [1, -1, width]), _const("sh_axis0", [0])]
    tail: list[bytes] = []
    for kind, perm in (("k", [2, 0, 1]), ("v", [1, 0, 2])):
        stacked = []
        for layer in range(layers):
            base = f"cross_{kind}{layer}"
            tail += [
                _node("Transpose", [base], [f"{base}_t"], perm=perm),
                _node("Reshape", [f"{base}_t", "sh_rows"], [f"{base}_r"]),
                _node("Unsqueeze", [f"{base}_r", "sh_axis0"], [f"{base}_u"]),
            ]
            stacked.append(f"{base}_u")
        tail.append(_node("Concat", stacked, [f"n_layer_cross_{kind}"], axis=0))
    outputs: list[bytes | str] = [
        _value(_OUTPUT, f"n_layer_cross_{kind}", _FLOAT, [layers, 1, "T", width]) for kind in "kv"
    ]
    _rewrite(src, dst, [], consts + tail, ["mel"], outputs)


def _decoder(src: Path, dst: Path, layers: int, heads: int, width: int, context: int) -> None:
    head = [
        _const("sh_zero", [0]), _const("sh_one", [1]), _const("sh_two", [2]),
        _const("sh_axis0", [0]), _const("sh_ctx", [context]),
        _const("sh_heads", [-1, heads, width // heads]),
        _node("Shape", ["tokens"], ["sh_tokens_shape"]),
        _node("Slice", ["sh_tokens_shape", "sh_one", "sh_two"], ["sh_n_new"]),
        _node("Add", ["offset", "sh_n_new"], ["sh_end"]),
    ]  # fmt: skip
    tail: list[bytes] = []
    for layer in range(layers):
        index = f"sh_layer{layer}"
        head.append(_const(index, [layer], scalar=True))
        for kind, perm in (("k", [1, 2, 0]), ("v", [1, 0, 2])):
            cache, cross = f"in_n_layer_self_{kind}_cache", f"n_layer_cross_{kind}"
            mine = f"sh_cache_{kind}{layer}"
            head += [
                _node("Gather", [cache, index], [mine], axis=0),
                _node("Slice", [mine, "sh_zero", "offset", "sh_one"], [f"past_{kind}{layer}"]),
                _node("Gather", [cross, index], [f"sh_cross_{kind}{layer}"], axis=0),
                _node("Reshape", [f"sh_cross_{kind}{layer}", "sh_heads"], [f"sh_x{kind}{layer}"]),
                _node("Transpose", [f"sh_x{kind}{layer}"], [f"cross_{kind}{layer}"], perm=perm),
            ]
            tail += [
                _node("Slice", [mine, "sh_end", "sh_ctx", "sh_one"], [f"sh_rest_{kind}{layer}"]),
                _node(
                    "Concat",
                    [f"past_{kind}{layer}", f"new_{kind}{layer}", f"sh_rest_{kind}{layer}"],
                    [f"sh_upd_{kind}{layer}"],
                    axis=1,
                ),
                _node(
                    "Unsqueeze", [f"sh_upd_{kind}{layer}", "sh_axis0"], [f"sh_out_{kind}{layer}"]
                ),
            ]
    for kind in "kv":
        outs = [f"sh_out_{kind}{layer}" for layer in range(layers)]
        tail.append(_node("Concat", outs, [f"out_n_layer_self_{kind}_cache"], axis=0))
    cache_dims: list[int | str] = [layers, 1, context, width]
    inputs: list[bytes | str] = [
        "tokens",
        _value(_INPUT, "in_n_layer_self_k_cache", _FLOAT, cache_dims),
        _value(_INPUT, "in_n_layer_self_v_cache", _FLOAT, cache_dims),
        _value(_INPUT, "n_layer_cross_k", _FLOAT, [layers, 1, "T", width]),
        _value(_INPUT, "n_layer_cross_v", _FLOAT, [layers, 1, "T", width]),
        "offset",
    ]
    outputs: list[bytes | str] = [
        "logits",
        _value(_OUTPUT, "out_n_layer_self_k_cache", _FLOAT, cache_dims),
        _value(_OUTPUT, "out_n_layer_self_v_cache", _FLOAT, cache_dims),
    ]
    _rewrite(src, dst, head, tail, inputs, outputs)


def copy_folder(folder: Path) -> Path:
    """Where the sherpa-onnx copy of `folder` lives: beside it, named as sherpa-onnx's
    release of the same model is (``sherpa-onnx-whisper-tiny.en``)."""
    name = folder.name if folder.name.startswith("whisper") else f"whisper-{folder.name}"
    return folder.parent / f"sherpa-onnx-{name}"


def _complete(copy: Path, name: str) -> bool:
    parts = (f"{name}-encoder.int8.onnx", f"{name}-decoder.int8.onnx", f"{name}-tokens.txt")
    return all((copy / part).is_file() for part in parts)


def layout_copy(folder: Path) -> Path:
    """The sherpa-onnx copy of `folder`, made when first needed (about a second) and kept
    beside it, so later jobs and other processes reuse it. Made in a temporary sibling and
    renamed into place: a worker starting at the same time sees no copy or a whole one."""
    copy = copy_folder(folder)
    if _complete(copy, folder.name):
        return copy
    started = time.monotonic()
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{copy.name}.", dir=folder.parent))
    except OSError as exc:
        raise ConfigError(
            f"sherpa-onnx cannot load {folder} (mcp-media's per-layer whisper export) and"
            f" its sherpa-layout copy cannot be made beside it: {exc}"
        ) from exc
    try:
        export(folder, staging)
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the copy from other users
        try:
            staging.rename(copy)
        except OSError as exc:
            if _complete(copy, folder.name):  # another process's copy won the race
                return copy
            raise ConfigError(
                f"{copy} is in the way of the sherpa-onnx copy of {folder}: remove it"
            ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.warning(
        "made the sherpa-onnx layout copy of %s at %s in %.1f s (sherpa-onnx cannot read"
        " the per-layer export; later jobs reuse the copy)",
        folder, copy, time.monotonic() - started,
    )  # fmt: skip
    return copy
