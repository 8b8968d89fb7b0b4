"""The MCP door: proxy overhead per call, context the model receives, time to first answer.

- overhead (`bench.mcp_latency`): p50 and p99 the proxy adds to a text-only call and to a
  ~20 KB screenshot whose summary is stored, alternating call by call with direct calls;
- context: bytes of the result content a model receives for a 1920x1080 screenshot with
  each `--images` policy; for a 3840x2160 one, bytes and tokens (images at w*h/750, as
  Claude counts them, text at 4 characters a token), and the time `fit` takes to make its copy;
- first answer: a result with 4 images through the door's rewriter, `--wait 0` against
  waiting for the summaries (jobs in this process, local provider).
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFilter

from bench.mcp_latency import overhead
from bench.results import record
from pipelines import MediaCache, ingest
from pipelines.fit import MAX_RESULT_BYTES, FitLimits, fit_image
from pipelines.fit_cache import FittedCopies
from pipelines.rewrite import MediaPolicy, RewritePolicy, rewrite_result
from workers.core.settings import Settings
from workers.doors.mcp.rewriter import DoorOptions, MediaRewriter
from workers.gateways.inline import InlineGateway


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    return {**env, "MCP_MEDIA_HOME": str(home)}


def screenshot_result() -> dict[str, Any]:
    """A 1920x1080 desktop: text on white, and a photo-like (noisy) quarter, as PNG."""
    image = Image.new("RGB", (1920, 1080), "white")
    draw = ImageDraw.Draw(image)
    for row in range(40):
        draw.text((20, 20 + row * 26), f"row {row}: build #{row * 37} passed in {row}.2 s" * 4)
    rng = random.Random(7)
    photo = Image.frombytes("RGB", (960, 540), rng.randbytes(960 * 540 * 3))
    image.paste(photo.filter(ImageFilter.GaussianBlur(1)), (960, 540))
    out = io.BytesIO()
    image.save(out, format="PNG")
    data = base64.b64encode(out.getvalue()).decode()
    return {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}


def context(home: Path) -> None:
    result = screenshot_result()
    cache = MediaCache(home / "cache")
    rendered = ingest(result, cache=cache)
    summary = {rendered.media[0].sha256: ["[Image summary — ...]\n" + "a summary " * 40]}
    sizes: dict[str, int] = {}
    for policy in MediaPolicy:
        out = rewrite_result(result, rendered, summary, RewritePolicy(images=policy))
        sizes[policy.value] = len(json.dumps(out["content"]).encode())
    for name, size in sizes.items():
        record(
            f"mcp_context_bytes_1080p_{name}",
            {
                "value": float(size),
                "unit": "bytes",
                "baseline": float(sizes["keep"]),
                "baseline_of": "the same screenshot with --images keep",
                "ratio": size / sizes["keep"],
                "target": "report",
                "better": "lower",
            },
        )


def _tokens(content: list[dict[str, Any]]) -> float:
    """Image blocks at w*h/750 for the pixels sent; text at 4 characters a token."""
    tokens = 0.0
    for block in content:
        if block.get("type") == "image":
            with Image.open(io.BytesIO(base64.b64decode(block["data"]))) as image:
                tokens += image.width * image.height / 750
        elif block.get("type") == "text":
            tokens += len(block["text"]) / 4
    return tokens


def context_4k(home: Path) -> None:
    from tests.support.screens import screenshot_png

    data = base64.b64encode(screenshot_png(3840, 2160)).decode()
    result = {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
    cache = MediaCache(home / "cache-4k")
    rendered = ingest(result, cache=cache)
    summary = {rendered.media[0].sha256: ["[Image summary — ...]\n" + "a summary " * 40]}
    sizes: dict[str, tuple[int, float]] = {}
    for policy in MediaPolicy:
        out = rewrite_result(result, rendered, summary, RewritePolicy(images=policy))
        sizes[policy.value] = (len(json.dumps(out)), _tokens(out["content"]))
    keep_bytes, keep_tokens = sizes["keep"]
    for name, (size, tokens) in sizes.items():
        fit = name == MediaPolicy.FIT
        record(
            f"mcp_context_bytes_4k_{name}",
            {
                "value": float(size),
                "unit": "bytes",
                "baseline": float(keep_bytes),
                "baseline_of": "the same 3840x2160 screenshot with --images keep",
                "ratio": size / keep_bytes,
                "target": f"value <= {MAX_RESULT_BYTES}" if fit else "report",
                "better": "lower",
            },
        )
        record(
            f"mcp_context_tokens_4k_{name}",
            {
                "value": tokens,
                "unit": "tokens",
                "baseline": keep_tokens,
                "baseline_of": "the same screenshot with --images keep (w*h/750 before any "
                "downscaling by the client)",
                "ratio": tokens / keep_tokens,
                "target": "report",
                "better": "lower",
            },
        )
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fit_image(rendered.media[0].path, "image/png", FitLimits())
        times.append(time.perf_counter() - start)
    record(
        "mcp_fit_4k_copy_ms",
        {
            "value": min(times) * 1000,
            "unit": "ms",
            "baseline": None,
            "baseline_of": "best of 5: header check, bounded decode, downscale, PNG encode",
            "ratio": None,
            "target": "report",
            "better": "lower",
        },
    )
    blob = rendered.media[0]
    copies = FittedCopies(home / "fitted-4k")
    start = time.perf_counter()
    copies.fit(blob.path, blob.sha256, blob.mime, FitLimits())  # made and kept
    first = time.perf_counter() - start
    again = []
    for _ in range(5):
        start = time.perf_counter()
        copies.fit(blob.path, blob.sha256, blob.mime, FitLimits())
        again.append(time.perf_counter() - start)
    record(
        "mcp_fit_4k_kept_copy_ms",
        {
            "value": min(again) * 1000,
            "unit": "ms",
            "baseline": first * 1000,
            "baseline_of": "the first call for the same screenshot and limits (made and kept)",
            "ratio": min(again) / first,
            "target": "report",
            "better": "lower",
        },
    )


def first_answer(home: Path) -> None:
    from tests.support.factories import png_bytes

    blocks = [
        {
            "type": "image",
            "data": base64.b64encode(png_bytes((320, 200), (40 * i, 90, 160))).decode(),
            "mimeType": "image/png",
        }
        for i in range(4)
    ]
    timings = {}
    for wait in (0.0, 120.0):
        settings = Settings.from_env({**_env(home / f"wait-{wait:g}")})
        rewriter = MediaRewriter(
            settings, DoorOptions(wait=wait, inline=True), InlineGateway(settings)
        )
        start = time.perf_counter()
        out = rewriter.rewrite({"content": blocks})
        timings[wait] = time.perf_counter() - start
        rewriter.close(finish_jobs=True)
        notes = sum("still running" in b.get("text", "") for b in out["content"])
        print(f"  wait {wait:g}: {notes} of 4 summaries still running at the answer")
    record(
        "mcp_first_answer_4_images_s",
        {
            "value": timings[0.0],
            "unit": "s",
            "baseline": timings[120.0],
            "baseline_of": "the same 4 images waiting for every summary (jobs in this process)",
            "ratio": timings[120.0] / timings[0.0],
            "target": "report",
            "better": "lower",
        },
    )


def run() -> None:
    with tempfile.TemporaryDirectory(prefix="mcp-media-bench-") as scratch:
        home = Path(scratch)
        context(home)
        context_4k(home)
        first_answer(home)
        overhead(home)
