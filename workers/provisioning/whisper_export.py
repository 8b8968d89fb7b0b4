"""Convert whisper CTranslate2 weights into the ONNX pair `pipelines.engines.whisper` runs.

Run only as a script by the isolated conversion venv that ``workers.provisioning.models`` builds
(torch, openai-whisper, onnx, onnxruntime); runtime code never imports this module::

    python whisper_export.py --model-bin model.bin --out DIR [--model-type whisper-tiny.en]

Writes ``encoder.int8.onnx``, ``decoder.int8.onnx``, ``tokens.txt`` and ``mel_filters.npy``
into DIR and prints a JSON report on stdout. The layout (one cross-attention key/value pair
and one self-attention cache pair per decoder layer, as separate tensors) is ours: a decoder
step then copies no cache, which the single stacked tensors of sherpa-onnx's layout cost.
Heavy modules are loaded with importlib and typed as ``Any`` so that
mypy --strict checks this file without torch installed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import struct
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

torch: Any = importlib.import_module("torch")
np: Any = importlib.import_module("numpy")
onnx: Any = importlib.import_module("onnx")
ort: Any = importlib.import_module("onnxruntime")
ort_quant: Any = importlib.import_module("onnxruntime.quantization")
whisper: Any = importlib.import_module("whisper")
whisper_audio: Any = importlib.import_module("whisper.audio")
whisper_model: Any = importlib.import_module("whisper.model")
whisper_tokenizer: Any = importlib.import_module("whisper.tokenizer")

OPSET = 17
# 2: the decoder's `alignment` output and the encoder's `alignment_heads` (word timestamps);
# 3: a dynamic batch axis (windows decoded in lockstep)
EXPORT_VERSION = "3"
# CTranslate2 DataType ids (include/ctranslate2/types.h); bfloat16 has no numpy dtype.
CT2_DTYPES: Mapping[int, str] = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2"}
CT2_MAX_BINARY_VERSION = 6


class ConversionError(RuntimeError):
    """The input is not a whisper CTranslate2 model this converter understands."""


def _read(stream: BinaryIO, fmt: str) -> tuple[Any, ...]:
    size = struct.calcsize("<" + fmt)
    data = stream.read(size)
    if len(data) != size:
        raise ConversionError("model.bin ends early")
    return struct.unpack("<" + fmt, data)


def _read_string(stream: BinaryIO) -> str:
    (length,) = _read(stream, "H")
    return bytes(stream.read(length)).rstrip(b"\0").decode("utf-8")


def read_ct2(path: Path) -> tuple[str, dict[str, Any]]:
    """Parse a CTranslate2 ``model.bin``: (spec name, variable name -> numpy array)."""
    variables: dict[str, Any] = {}
    with path.open("rb") as stream:
        (version,) = _read(stream, "I")
        if not 4 <= version <= CT2_MAX_BINARY_VERSION:
            raise ConversionError(f"unsupported CTranslate2 binary version {version}")
        spec = _read_string(stream)
        _read(stream, "I")  # spec revision
        (count,) = _read(stream, "I")
        for _ in range(count):
            name = _read_string(stream)
            (rank,) = _read(stream, "B")
            shape = _read(stream, "I" * rank)
            dtype_id, num_bytes = _read(stream, "BI")
            if dtype_id not in CT2_DTYPES:
                raise ConversionError(f"{name}: unsupported CTranslate2 dtype id {dtype_id}")
            raw = stream.read(num_bytes)
            if len(raw) != num_bytes:
                raise ConversionError(f"{name}: truncated data")
            array = np.frombuffer(raw, dtype=CT2_DTYPES[dtype_id]).reshape(shape)
            variables[name] = array
        (aliases,) = _read(stream, "I")
        for _ in range(aliases):
            alias = _read_string(stream)
            variables[alias] = variables[_read_string(stream)]
    return spec, variables


def _count_layers(variables: Mapping[str, Any], prefix: str) -> int:
    pattern = re.compile(rf"^{prefix}/layer_(\d+)/")
    found = {int(m.group(1)) for name in variables if (m := pattern.match(name))}
    if found != set(range(len(found))) or not found:
        raise ConversionError(f"{prefix}: missing or non-contiguous layers {sorted(found)}")
    return len(found)


def dimensions(variables: Mapping[str, Any]) -> Any:
    conv1 = variables["encoder/conv1/weight"]
    embeddings = variables["decoder/embeddings/weight"]
    return whisper_model.ModelDimensions(
        n_mels=int(conv1.shape[1]),
        n_audio_ctx=int(variables["encoder/position_encodings/encodings"].shape[0]),
        n_audio_state=int(conv1.shape[0]),
        n_audio_head=int(variables["encoder/num_heads"]),
        n_audio_layer=_count_layers(variables, "encoder"),
        n_vocab=int(embeddings.shape[0]),
        n_text_ctx=int(variables["decoder/position_encodings/encodings"].shape[0]),
        n_text_state=int(embeddings.shape[1]),
        n_text_head=int(variables["decoder/num_heads"]),
        n_text_layer=_count_layers(variables, "decoder"),
    )


def state_dict(variables: Mapping[str, Any], dims: Any) -> dict[str, Any]:
    """Map CTranslate2 names onto openai-whisper's, splitting the fused projections.

    CTranslate2 fuses self-attention q|k|v into ``linear_0`` and cross-attention k|v into
    ``linear_1``; whisper's key projection has no bias (CTranslate2 stores zeros there).
    """

    def tensor(name: str) -> Any:
        return torch.from_numpy(np.asarray(variables[name], dtype=np.float32).copy())

    def chunks(name: str, parts: int) -> list[Any]:
        return list(torch.chunk(tensor(name), parts, dim=0))

    out: dict[str, Any] = {}

    def linear(dst: str, src: str) -> None:
        out[f"{dst}.weight"] = tensor(f"{src}/weight")
        out[f"{dst}.bias"] = tensor(f"{src}/bias")

    def norm(dst: str, src: str) -> None:
        out[f"{dst}.weight"] = tensor(f"{src}/gamma")
        out[f"{dst}.bias"] = tensor(f"{src}/beta")

    def self_attention(dst: str, src: str) -> None:
        q_w, k_w, v_w = chunks(f"{src}/linear_0/weight", 3)
        q_b, k_b, v_b = chunks(f"{src}/linear_0/bias", 3)
        if float(k_b.abs().max()) > 0.0:
            raise ConversionError(f"{src}: whisper key projections have no bias")
        out.update({f"{dst}.query.weight": q_w, f"{dst}.query.bias": q_b})
        out.update({f"{dst}.key.weight": k_w})
        out.update({f"{dst}.value.weight": v_w, f"{dst}.value.bias": v_b})
        linear(f"{dst}.out", f"{src}/linear_1")
        norm(f"{dst}_ln", f"{src}/layer_norm")

    def cross_attention(dst: str, src: str) -> None:
        linear(f"{dst}.query", f"{src}/linear_0")
        k_w, v_w = chunks(f"{src}/linear_1/weight", 2)
        k_b, v_b = chunks(f"{src}/linear_1/bias", 2)
        if float(k_b.abs().max()) > 0.0:
            raise ConversionError(f"{src}: whisper key projections have no bias")
        out.update({f"{dst}.key.weight": k_w})
        out.update({f"{dst}.value.weight": v_w, f"{dst}.value.bias": v_b})
        linear(f"{dst}.out", f"{src}/linear_2")
        norm(f"{dst}_ln", f"{src}/layer_norm")

    def mlp(dst: str, src: str) -> None:
        linear(f"{dst}.mlp.0", f"{src}/linear_0")
        linear(f"{dst}.mlp.2", f"{src}/linear_1")
        norm(f"{dst}.mlp_ln", f"{src}/layer_norm")

    linear("encoder.conv1", "encoder/conv1")
    linear("encoder.conv2", "encoder/conv2")
    out["encoder.positional_embedding"] = tensor("encoder/position_encodings/encodings")
    for i in range(dims.n_audio_layer):
        self_attention(f"encoder.blocks.{i}.attn", f"encoder/layer_{i}/self_attention")
        mlp(f"encoder.blocks.{i}", f"encoder/layer_{i}/ffn")
    norm("encoder.ln_post", "encoder/layer_norm")

    out["decoder.token_embedding.weight"] = tensor("decoder/embeddings/weight")
    out["decoder.positional_embedding"] = tensor("decoder/position_encodings/encodings")
    for i in range(dims.n_text_layer):
        self_attention(f"decoder.blocks.{i}.attn", f"decoder/layer_{i}/self_attention")
        cross_attention(f"decoder.blocks.{i}.cross_attn", f"decoder/layer_{i}/attention")
        mlp(f"decoder.blocks.{i}", f"decoder/layer_{i}/ffn")
    norm("decoder.ln", "decoder/layer_norm")
    return out


def load_whisper(model_bin: Path) -> Any:
    spec, variables = read_ct2(model_bin)
    if spec != "WhisperSpec":
        raise ConversionError(f"expected a WhisperSpec model, got {spec!r}")
    dims = dimensions(variables)
    model = whisper_model.Whisper(dims)
    reference = model.encoder.positional_embedding.clone()
    model.load_state_dict(state_dict(variables, dims), strict=True)
    drift = float((model.encoder.positional_embedding - reference).abs().max())
    if drift > 1e-2:
        raise ConversionError(f"encoder position encodings are not whisper's sinusoids ({drift})")
    return model.eval()


def _attend(q: Any, k: Any, v: Any, n_head: int, bias: Any | None) -> Any:
    batch, n_q, state = q.shape
    head = state // n_head
    q = q.reshape(batch, n_q, n_head, head).transpose(1, 2)
    k = k.reshape(batch, k.shape[1], n_head, head).transpose(1, 2)
    v = v.reshape(batch, v.shape[1], n_head, head).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) * (head**-0.5)
    if bias is not None:
        scores = scores + bias
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, n_q, state)


def _heads_first(x: Any, n_head: int, transpose: bool) -> Any:
    """[batch, T, state] -> [batch * n_head, T, head] (or [batch * n_head, head, T])."""
    batch, frames, state = x.shape
    x = x.reshape(batch, frames, n_head, state // n_head).permute(0, 2, 1, 3)
    if transpose:
        x = x.transpose(-1, -2)
    return x.reshape(batch * n_head, *x.shape[2:])


def cross_names(n_layer: int) -> list[str]:
    return [f"cross_{kv}{i}" for i in range(n_layer) for kv in "kv"]


def cache_names(prefix: str, n_layer: int) -> list[str]:
    return [f"{prefix}_{kv}{i}" for i in range(n_layer) for kv in "kv"]


class AudioEncoderExport(torch.nn.Module):  # type: ignore[misc]
    """mel [batch, n_mels, T] (T <= 3000 frames) -> each decoder layer's cross-attention keys
    ``cross_k<i>`` [batch x n_head, head, T/2] (transposed) and values ``cross_v<i>`` [batch x
    n_head, T/2, head], computed once per chunk so no decoder step re-lays them out."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.encoder = model.encoder
        self.decoder_blocks = model.decoder.blocks
        self.n_head = model.dims.n_text_head

    def forward(self, mel: Any) -> tuple[Any, ...]:
        enc = self.encoder
        x = torch.nn.functional.gelu(enc.conv1(mel))
        x = torch.nn.functional.gelu(enc.conv2(x)).permute(0, 2, 1)
        x = x + enc.positional_embedding[: x.shape[1]]
        for block in enc.blocks:
            x = block(x)  # whisper's own block; convert() turns SDPA off for a plain graph
        x = enc.ln_post(x)
        n = self.n_head
        out: list[Any] = []
        for b in self.decoder_blocks:
            out.append(_heads_first(b.cross_attn.key(x), n, True))
            out.append(_heads_first(b.cross_attn.value(x), n, False))
        return tuple(out)


def _attend_cross(q: Any, k_t: Any, v: Any, n_head: int) -> tuple[Any, Any]:
    """Attention over head-split keys [batch x n_head, head, T] and values [batch x n_head,
    T, head]; also its scaled scores before the softmax [batch, n_head, n_q, T] (what word
    alignment reads)."""
    batch, n_q, state = q.shape
    head = state // n_head
    q = q.reshape(batch, n_q, n_head, head).transpose(1, 2).reshape(batch * n_head, n_q, head)
    scores = (q @ k_t) * (head**-0.5)
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).reshape(batch, n_head, n_q, head).transpose(1, 2).reshape(batch, n_q, state)
    return out, scores.reshape(batch, n_head, n_q, scores.shape[-1])


def alignment_heads(model: Any, model_type: str) -> list[tuple[int, int]]:
    """(decoder layer, head) pairs whose cross-attention follows the speech in time: the
    ones openai-whisper lists for this model (``whisper._ALIGNMENT_HEADS``), else its
    default, every head of the upper half of the layers."""
    name = model_type.removeprefix("whisper-")
    dump = getattr(whisper, "_ALIGNMENT_HEADS", {}).get(name)
    if dump is not None:
        model.set_alignment_heads(dump)
    pairs = model.alignment_heads.to_dense().nonzero().tolist()
    return [(int(layer), int(head)) for layer, head in pairs]


class TextDecoderExport(torch.nn.Module):  # type: ignore[misc]
    """One decoder step: ``tokens`` [batch, n] at absolute position ``offset`` (one for
    every row: windows decode in lockstep), each layer's past keys/values
    ``past_k<i>``/``past_v<i>`` [batch, offset, state] and cross keys/values in; the last
    token's ``logits`` [batch, 1, vocab] and each layer's keys/values of the new tokens
    ``new_k<i>``/``new_v<i>`` [batch, n, state] out. The caller keeps the cache (a
    preallocated buffer it hands in as views), so a step moves no cache bytes. Last,
    ``alignment`` [batch x n_heads, n, T]: the cross-attention scores (before the softmax)
    of the alignment heads, from which word times are found (a copy of a few rows the step
    computes anyway).
    """

    def __init__(self, model: Any, heads: list[tuple[int, int]]) -> None:
        super().__init__()
        self.decoder = model.decoder
        self.n_layer = model.dims.n_text_layer
        self.heads = heads
        # The output projection as its own constant [state, vocab] matrix: a MatMul with a
        # constant weight is what dynamic int8 quantisation converts (a transposed view of
        # the embedding is not), and this projection is most of a step's arithmetic.
        self.projection = torch.nn.Parameter(
            model.decoder.token_embedding.weight.detach().transpose(0, 1).contiguous(),
            requires_grad=False,
        )

    def forward(self, tokens: Any, offset: Any, *tensors: Any) -> tuple[Any, ...]:
        dec = self.decoder
        past, cross = tensors[: 2 * self.n_layer], tensors[2 * self.n_layer :]
        # Lengths stay tensors (arange, shapes) so the trace keeps n and offset dynamic.
        steps = torch.arange(tokens.shape[1], dtype=torch.int64)
        positions = offset + steps
        x = dec.token_embedding(tokens) + torch.index_select(dec.positional_embedding, 0, positions)
        # New tokens see every past slot and, among themselves, only earlier ones.
        causal = steps.reshape(1, -1) <= steps.reshape(-1, 1)
        bias = torch.cat(
            [
                torch.zeros(steps.shape[0], past[0].shape[1], dtype=x.dtype),
                torch.zeros(causal.shape, dtype=x.dtype).masked_fill(~causal, float("-inf")),
            ],
            dim=1,
        )
        written: list[Any] = []
        aligned: list[Any] = []
        for i, block in enumerate(dec.blocks):
            attn = block.attn
            h = block.attn_ln(x)
            k, v = attn.key(h), attn.value(h)
            written += [k, v]
            keys = torch.cat([past[2 * i], k], dim=1)
            values = torch.cat([past[2 * i + 1], v], dim=1)
            x = x + attn.out(_attend(attn.query(h), keys, values, attn.n_head, bias))
            cross_attn = block.cross_attn
            h = block.cross_attn_ln(x)
            attended, scores = _attend_cross(
                cross_attn.query(h), cross[2 * i], cross[2 * i + 1], cross_attn.n_head
            )
            aligned += [scores[:, head : head + 1] for layer, head in self.heads if layer == i]
            x = x + cross_attn.out(attended)
            x = x + block.mlp(block.mlp_ln(x))
        logits = dec.ln(x[:, -1:]) @ self.projection
        alignment = torch.cat(aligned, dim=1)
        return (logits, *written, alignment.reshape(-1, *alignment.shape[2:]))


def encoder_metadata(model: Any, model_type: str, heads: list[tuple[int, int]]) -> dict[str, str]:
    """What the runner reads from the encoder: dims and special tokens (sherpa-onnx's names),
    and the alignment heads behind the decoder's ``alignment`` output ("layer,head;...")."""
    dims = model.dims
    tokenizer = whisper_tokenizer.get_tokenizer(
        model.is_multilingual, num_languages=model.num_languages
    )
    meta: dict[str, Any] = {
        "model_type": model_type,
        "version": EXPORT_VERSION,
        "maintainer": "mcp-media",
        **{field: getattr(dims, field) for field in dims.__dataclass_fields__},
        "sot": tokenizer.sot,
        "sot_index": tokenizer.sot_sequence.index(tokenizer.sot),
        "sot_sequence": ",".join(str(t) for t in tokenizer.sot_sequence),
        "eot": tokenizer.eot,
        "blank_id": tokenizer.encode(" ")[0],
        "is_multilingual": int(model.is_multilingual),
        "no_speech": tokenizer.no_speech,
        "non_speech_tokens": ",".join(str(t) for t in tokenizer.non_speech_tokens),
        "transcribe": tokenizer.transcribe,
        "translate": tokenizer.translate,
        "sot_prev": tokenizer.sot_prev,
        "sot_lm": tokenizer.sot_lm,
        "no_timestamps": tokenizer.no_timestamps,
        "alignment_heads": ";".join(f"{layer},{head}" for layer, head in heads),
    }
    if model.is_multilingual:
        meta["all_language_tokens"] = ",".join(str(t) for t in tokenizer.all_language_tokens)
        meta["all_language_codes"] = ",".join(tokenizer.all_language_codes)
    return {key: str(value) for key, value in meta.items()}


def export(model: Any, heads: list[tuple[int, int]], work: Path) -> tuple[Path, Path]:
    """The fp32 pair, every batch-sized axis dynamic. Traced at batch 2, so no size of one
    is taken for a constant; `check` runs them at 1 and 2."""
    dims = model.dims
    encoder_path = work / "encoder.onnx"
    decoder_path = work / "decoder.onnx"
    cross = cross_names(dims.n_text_layer)
    past = cache_names("past", dims.n_text_layer)
    new = cache_names("new", dims.n_text_layer)
    mel = torch.zeros(2, dims.n_mels, 2 * dims.n_audio_ctx)
    frames = {
        name: {0: "batch_heads", 2 if name.startswith("cross_k") else 1: "T"} for name in cross
    }
    torch.onnx.export(
        AudioEncoderExport(model),
        (mel,),
        str(encoder_path),
        input_names=["mel"],
        output_names=cross,
        dynamic_axes={"mel": {0: "batch", 2: "frames"}, **frames},
        opset_version=OPSET,
        dynamo=False,
    )
    with torch.no_grad():
        cross_values = AudioEncoderExport(model)(mel)
    empty = [torch.zeros(2, 0, dims.n_text_state) for _ in past]
    prompt = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int64)
    torch.onnx.export(
        TextDecoderExport(model, heads),
        (prompt, torch.zeros(1, dtype=torch.int64), *empty, *cross_values),
        str(decoder_path),
        input_names=["tokens", "offset", *past, *cross],
        output_names=["logits", *new, "alignment"],
        dynamic_axes={
            "tokens": {0: "batch", 1: "n_tokens"},
            **{name: {0: "batch", 1: "offset"} for name in past},
            **frames,
            "logits": {0: "batch"},
            **{name: {0: "batch", 1: "n_tokens"} for name in new},
            "alignment": {0: "batch_alignment_heads", 1: "n_tokens", 2: "T"},
        },
        opset_version=OPSET,
        dynamo=False,
    )
    return encoder_path, decoder_path


def quantize(src: Path, dst: Path, metadata: Mapping[str, str]) -> None:
    """int8 weights with one scale per output channel, as CTranslate2's int8 has: with one
    scale per tensor, tiny.en made 154 word errors on 16 one-minute clips of the bench voice
    where per-channel scales made 124, at the same size and speed."""
    ort_quant.quantize_dynamic(
        model_input=str(src),
        model_output=str(dst),
        op_types_to_quantize=["MatMul", "Gather"],
        weight_type=ort_quant.QuantType.QInt8,
        per_channel=True,
    )
    proto = onnx.load(str(dst))
    del proto.metadata_props[:]
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = value
    onnx.save(proto, str(dst))


def check(
    model: Any,
    heads: list[tuple[int, int]],
    encoder_path: Path,
    decoder_path: Path,
    tolerance: float | None,
) -> float:
    """Largest logit gap between ONNX step-by-step decoding and whisper's own decoder.

    With a tolerance (the fp32 export) the greedy choice must also agree at every step, and
    the ``alignment`` output must be whisper's own cross-attention scores of those heads;
    int8 weights legitimately move near-ties on random input, so they are only measured.
    """
    dims = model.dims
    generator = torch.Generator().manual_seed(0)
    frames = 2 * dims.n_audio_ctx - 400  # also exercise T below 30 s
    mel = torch.randn(1, dims.n_mels, frames, generator=generator) * 0.5
    tokenizer = whisper_tokenizer.get_tokenizer(
        model.is_multilingual, num_languages=model.num_languages
    )
    prompt = list(tokenizer.sot_sequence_including_notimestamps)
    tokens = prompt + tokenizer.encode(" The quick brown fox")
    with torch.no_grad():
        enc = model.encoder
        x = torch.nn.functional.gelu(enc.conv1(mel))
        x = torch.nn.functional.gelu(enc.conv2(x)).permute(0, 2, 1)
        audio = x + enc.positional_embedding[: x.shape[1]]
        for block in enc.blocks:
            audio = block(audio)
        audio = enc.ln_post(audio)
        scores: dict[int, Any] = {}
        hooks = [
            block.cross_attn.register_forward_hook(
                lambda _m, _i, out, layer=layer: scores.__setitem__(layer, out[1][0])
            )
            for layer, block in enumerate(model.decoder.blocks)
        ]
        expected = model.decoder(torch.tensor([tokens]), audio).numpy()
        for hook in hooks:
            hook.remove()
        expected_alignment = np.stack([scores[layer][head].numpy() for layer, head in heads])

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    encoder = ort.InferenceSession(str(encoder_path), options, providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(decoder_path), options, providers=["CPUExecutionProvider"])
    outputs = encoder.run(None, {"mel": mel.numpy()})
    cross = dict(zip(cross_names(dims.n_text_layer), outputs, strict=True))
    past = cache_names("past", dims.n_text_layer)
    cache = {name: np.zeros((1, 0, dims.n_text_state), dtype=np.float32) for name in past}
    feeds = [prompt] + [[t] for t in tokens[len(prompt) :]]
    offset = 0
    worst = 0.0
    aligned = []
    for chunk in feeds:
        logits, *written, alignment = decoder.run(
            None,
            {
                "tokens": np.array([chunk], dtype=np.int64),
                "offset": np.array([offset], dtype=np.int64),
                **cache,
                **cross,
            },
        )
        cache = {
            name: np.concatenate([cache[name], new], axis=1)
            for name, new in zip(past, written, strict=True)
        }
        aligned.append(alignment)
        offset += len(chunk)
        want = expected[0, offset - 1]
        worst = max(worst, float(np.abs(logits[0, -1] - want).max()))
        if tolerance is not None and int(logits[0, -1].argmax()) != int(want.argmax()):
            raise ConversionError(f"ONNX decoder disagrees with whisper at position {offset}")
    if tolerance is not None and worst > tolerance:
        raise ConversionError(f"ONNX logits differ from whisper by {worst:.4f} > {tolerance}")
    gap = float(np.abs(np.concatenate(aligned, axis=1) - expected_alignment).max())
    if tolerance is not None and gap > tolerance:
        raise ConversionError(f"ONNX alignment scores differ from whisper's by {gap:.4f}")
    return worst


def _greedy(encoder: Any, decoder: Any, mel: Any, prompt: list[int], dims: Any) -> tuple[Any, Any]:
    """(tokens [batch, 8], each step's logits [batch, 8, vocab]) of plain greedy decoding
    of every row of `mel` in lockstep, from `prompt`."""
    layers = dims.n_text_layer
    cross = dict(zip(cross_names(layers), encoder.run(None, {"mel": mel}), strict=True))
    past = cache_names("past", layers)
    batch = mel.shape[0]
    cache = {name: np.zeros((batch, 0, dims.n_text_state), np.float32) for name in past}
    feed = np.array([prompt] * batch, dtype=np.int64)
    chosen, scores, offset = [], [], 0
    for _ in range(8):
        logits, *written, _alignment = decoder.run(
            None, {"tokens": feed, "offset": np.array([offset], np.int64), **cache, **cross}
        )
        offset += feed.shape[1]
        cache = {
            name: np.concatenate([cache[name], new], axis=1)
            for name, new in zip(past, written, strict=True)
        }
        feed = logits[:, -1].argmax(axis=-1).reshape(batch, 1).astype(np.int64)
        chosen.append(feed[:, 0])
        scores.append(logits[:, -1])
    return np.stack(chosen, axis=1), np.stack(scores, axis=1)


def check_batch(model: Any, encoder_path: Path, decoder_path: Path, tolerance: float | None) -> int:
    """Steps where two different windows decoded as one batch of 2 chose other tokens than
    each decoded alone (the graphs were traced, and a size baked from the trace breaks a
    batch). With a tolerance (fp32) every token must agree and logits stay within it."""
    dims = model.dims
    generator = torch.Generator().manual_seed(1)
    frames = 2 * dims.n_audio_ctx - 600
    mel = (torch.randn(2, dims.n_mels, frames, generator=generator) * 0.5).numpy()
    tokenizer = whisper_tokenizer.get_tokenizer(
        model.is_multilingual, num_languages=model.num_languages
    )
    prompt = list(tokenizer.sot_sequence_including_notimestamps)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    encoder = ort.InferenceSession(str(encoder_path), options, providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(decoder_path), options, providers=["CPUExecutionProvider"])
    both, both_logits = _greedy(encoder, decoder, mel, prompt, dims)
    apart = [_greedy(encoder, decoder, mel[i : i + 1], prompt, dims) for i in range(2)]
    tokens = np.concatenate([t for t, _ in apart], axis=0)
    logits = np.concatenate([s for _, s in apart], axis=0)
    differ = int((tokens != both).sum())
    if tolerance is not None:
        if differ:
            raise ConversionError("a batch of 2 chose other tokens than each window alone")
        gap = float(np.abs(both_logits - logits).max())
        if gap > tolerance:
            raise ConversionError(f"a batch of 2 moves logits by {gap:.4f} > {tolerance}")
    return differ


def write_mel_filters(dst: Path, n_mels: int) -> None:
    """whisper's own mel filterbank [n_mels, 201] (librosa's Slaney filters, from its assets)."""
    filters = whisper_audio.mel_filters("cpu", n_mels).numpy().astype(np.float32)
    np.save(dst, filters, allow_pickle=False)


def write_tokens(dst: Path, multilingual: bool) -> int:
    """The tokens file (sherpa-onnx's format): each ``<base64 bytes> <rank>`` line of the vocabulary
    (``gpt2.tiktoken`` for English-only models, ``multilingual.tiktoken`` for the others)."""
    name = "multilingual.tiktoken" if multilingual else "gpt2.tiktoken"
    source = Path(whisper.__file__).with_name("assets") / name
    lines = [line for line in source.read_text(encoding="ascii").splitlines() if line.strip()]
    for number, line in enumerate(lines):
        _token, rank = line.split()
        if int(rank) != number:
            raise ConversionError(f"{name}: rank {rank} on line {number}")
    dst.write_text("\n".join(lines) + "\n", encoding="ascii")
    return len(lines)


def convert(model_bin: Path, out: Path, model_type: str) -> dict[str, Any]:
    started = time.perf_counter()
    whisper_model.MultiHeadAttention.use_sdpa = False
    model = load_whisper(model_bin)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="whisper-export-", dir=out) as tmp:
        work = Path(tmp)
        heads = alignment_heads(model, model_type)
        encoder_fp32, decoder_fp32 = export(model, heads, work)
        fp32_gap = check(model, heads, encoder_fp32, decoder_fp32, tolerance=1e-2)
        check_batch(model, encoder_fp32, decoder_fp32, tolerance=1e-2)
        exported = time.perf_counter()
        encoder_int8 = out / "encoder.int8.onnx"
        decoder_int8 = out / "decoder.int8.onnx"
        quantize(encoder_fp32, encoder_int8, encoder_metadata(model, model_type, heads))
        quantize(decoder_fp32, decoder_int8, {"model_type": model_type, "version": EXPORT_VERSION})
    int8_gap = check(model, heads, encoder_int8, decoder_int8, tolerance=None)
    int8_batch_differ = check_batch(model, encoder_int8, decoder_int8, tolerance=None)
    n_tokens = write_tokens(out / "tokens.txt", bool(model.is_multilingual))
    write_mel_filters(out / "mel_filters.npy", model.dims.n_mels)
    return {
        "dims": {k: getattr(model.dims, k) for k in model.dims.__dataclass_fields__},
        "tokens": n_tokens,
        "alignment_heads": heads,
        "fp32_max_logit_gap": fp32_gap,
        "int8_max_logit_gap": int8_gap,
        "int8_batch_tokens_differing": int8_batch_differ,
        "export_seconds": round(exported - started, 2),
        "total_seconds": round(time.perf_counter() - started, 2),
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-bin", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model-type", default="whisper-tiny.en")
    args = parser.parse_args(argv)
    try:
        report = convert(args.model_bin, args.out, args.model_type)
    except (ConversionError, KeyError) as exc:
        print(f"whisper_export: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
