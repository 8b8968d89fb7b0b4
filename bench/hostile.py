"""Time and peak memory of every hostile decoder input of issue 14, each in a fresh process.

    python -m bench.hostile [--src DIR] [--timeout S] [--only NAME ...]

For each input a new interpreter imports the project (from `--src` when given: measure
another checkout with the same builders), records its RSS, runs the stage and prints the
wall time, the extra peak RSS (VmHWM) of the process and of its decoder child over that
starting RSS,
and what the stage said. `ingest` runs `pipelines.ingest` on a tool result with one block,
`vision` runs `load_image` (what a vision job decodes), `stt` runs `decode_audio`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.corpus import build as b

ROOT = Path(__file__).resolve().parents[1]

INPUTS: dict[str, tuple[str, Callable[[], bytes], str]] = {
    # name: (stage, bytes, claimed MIME type)
    "jpeg_progressive_3000_scans": ("ingest", b.progressive_jpeg_scan_bomb, "image/jpeg"),
    "jpeg_progressive_3000_scans_vision": ("vision", b.progressive_jpeg_scan_bomb, ""),
    "tiff_tile_46336": ("ingest", b.tiff_tile_bomb, "image/tiff"),
    "fits_gzip_32bit_as_png": ("ingest", b.gzip_fits, "image/png"),
    "fits_gzip_16bit_as_png": ("ingest", lambda: b.gzip_fits(bits=16), "image/png"),
    "eps_as_png": ("ingest", lambda: b.EPS, "image/png"),
    "xpm_as_png": ("ingest", lambda: b.XPM, "image/png"),
    "tga_as_png": ("ingest", b.tga, "image/png"),
    "jpeg2000_8000_rgba16": ("ingest", b.jpeg2000_rgba16, "image/jp2"),
    "webp_8000": ("ingest", b.big_webp, "image/webp"),
    "webp_8000_vision": ("vision", b.big_webp, ""),
    "avif_8000": ("ingest", b.big_avif, "image/avif"),
    "png_3_5m_chunks": ("ingest", lambda: b.png_many_chunks(3_500_000), "image/png"),
    # Variants inside the limits: decoded, in the capped child.
    "webp_4000": ("ingest", lambda: b.big_webp(4000), "image/webp"),
    "webp_4000_vision": ("vision", lambda: b.big_webp(4000), ""),
    "avif_4000": ("ingest", lambda: b.big_avif(4000), "image/avif"),
    "jpeg_progressive_4000_10_scans": (
        "ingest",
        lambda: b.progressive_jpeg_scan_bomb(side=4000, scans=4),
        "image/jpeg",
    ),
    "wav_1hz_block_align_33000": ("stt", b.wav_1hz_block_align, ""),
    "wav_64_channels": ("stt", b.wav_64_channels, ""),
}

_CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path

def status_kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0

def child_peak_kib():
    try:
        from pipelines import bounded
    except ImportError:
        return 0
    return bounded.last_child_peak_kib[0]

stage, path, home = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if stage == "ingest":
    from pipelines import CacheLimits, MediaCache, ingest
    payload = path.read_bytes()
    cache = MediaCache(home / "cache", CacheLimits(max_blob_bytes=64 * 1024 * 1024))
    def run():
        out = ingest(payload, cache=cache)
        if out.markers:
            return f"{out.markers[0].reason.value}: {out.markers[0].message}"
        return "stored " + ", ".join(m.path.suffix for m in out.media)
elif stage == "vision":
    from pipelines.imaging import load_image
    def run():
        try:
            loaded = load_image(path, max_side=1568)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return f"decoded {loaded.image.size} {loaded.image.mode}"
else:
    from pipelines.speech.audio import decode_audio
    def run():
        try:
            audio = decode_audio(path, 16000)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return f"decoded {audio.duration_s:.1f} s"
before = status_kib("VmRSS")
started = time.monotonic()
said = run()
elapsed = time.monotonic() - started
peak = status_kib("VmHWM")  # this process's peak since exec (ru_maxrss survives exec)
child = child_peak_kib()  # the bounded decoder child's own VmHWM, when there was one
print(json.dumps({"seconds": round(elapsed, 2), "extra_rss_mib": round((peak - before) / 1024, 1),
                  "child_extra_rss_mib": round(max(0, child - before) / 1024, 1) if child else 0,
                  "said": said[:160]}))
"""


def measure(name: str, src: Path, timeout: float) -> dict[str, object]:
    stage, make, mime = INPUTS[name]
    data = make()
    with tempfile.TemporaryDirectory(prefix="mcp-media-hostile-") as tmp:
        path = Path(tmp) / "input.bin"
        if stage == "ingest":
            path.write_bytes(b.result(b.image(data, mime)))
        else:
            path.write_bytes(data)
        env = dict(os.environ, PYTHONPATH=str(src), MCP_MEDIA_HOME=str(Path(tmp) / "home"))
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, stage, str(path), str(Path(tmp) / "home")],
                capture_output=True,
                timeout=timeout,
                env=env,
                cwd=tmp,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"input": name, "bytes": len(data), "killed_after_s": timeout}
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            return {
                "input": name,
                "bytes": len(data),
                "exit": proc.returncode,
                "seconds": round(time.monotonic() - started, 2),
                "said": tail,
            }
        found: dict[str, object] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        return {"input": name, "bytes": len(data), **found}


def isolation_cost(runs: int = 30, ballast_mib: int = 0) -> list[dict[str, object]]:
    """Median ms per image of verify_image and load_image, in-process vs in the forked child;
    `ballast_mib` of touched memory stands for a caller that already holds models."""
    import statistics

    from pipelines.bounded import DecodeBudget
    from pipelines.imaging import load_image
    from pipelines.sniff import verify_image

    ballast = bytearray(ballast_mib * 1024 * 1024)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    images = {
        "png_16x12": b.png(),
        "jpeg_64x48": b.jpeg(),
        "png_1000x800_noise": b.noisy_png((1000, 800), 1),
        "webp_4000": b.big_webp(4000),
    }
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="mcp-media-isolation-") as tmp:
        for name, data in images.items():
            path = Path(tmp) / name
            path.write_bytes(data)
            row: dict[str, object] = {"image": name, "ballast_mib": ballast_mib}
            for isolate in (False, True):
                # forked: every decode in the child, whatever its size
                budget = DecodeBudget(isolate=isolate, isolate_above=-1)
                for stage in ("verify", "load"):
                    times = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        if stage == "verify":
                            verify_image(path, data[:64], budget=budget)
                        else:
                            load_image(path, max_side=1568, budget=budget)
                        times.append((time.perf_counter() - started) * 1000)
                    key = f"{stage}_{'forked' if isolate else 'in_process'}_ms"
                    row[key] = round(statistics.median(times), 2)
            rows.append(row)
    del ballast
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile")
    parser.add_argument("--src", type=Path, default=ROOT)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--isolation", action="store_true", help="measure the fork's cost")
    args = parser.parse_args(argv)
    if args.isolation:
        for ballast in (0, 1024):
            for row in isolation_cost(ballast_mib=ballast):
                print(json.dumps(row), flush=True)
        return 0
    for name in args.only or list(INPUTS):
        print(json.dumps(measure(name, args.src, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
