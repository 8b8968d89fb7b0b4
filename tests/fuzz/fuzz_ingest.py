"""Fuzz `pipelines.ingest` with mutations of the hostile corpus.

    python -m tests.fuzz.fuzz_ingest --count 100000 [--jobs 2] [--seed 1]

Every input is one mutation chain of a corpus seed: bit flips, truncation, hostile-token
insertion, block splicing, random base64, byte-level and structure-aware damage inside
decoded media (PNG chunks, JPEG segments, TIFF IFDs, WAV headers: media_mutators.py),
random JSON types in any field, JSON-RPC wrapping; fed as str, bytes or an already-parsed Mapping.
For every input: no exception but InvalidToolResult, every media path inside the cache
root and intact, no file event outside the root (audit hook), agent text that encodes and
forges no MEDIA: line. Every `--wipe-every` inputs the whole cache tree is checked (inside
the root, modes 0700/0600, no symlinks), the sandbox outside the cache is compared with a
snapshot, and the cache is wiped. Every fourth round plants `cache/audio` as a symlink
to a folder outside. Input `i` is reproducible alone: `--seed S --only i`.

Prints `fuzz: N inputs, F failures, T s` and exits 1 when F > 0.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from PIL import Image

from pipelines import CacheLimits, MediaCache, ingest
from pipelines.errors import InvalidToolResult
from pipelines.media import MarkerReason
from tests.corpus import build
from tests.corpus.oracle import (
    FileAudit,
    check_cache_tree,
    check_rendered,
    diff_snapshots,
    input_text_lines,
    outside,
    snapshot,
)
from tests.fuzz.media_mutators import mutate_media

MAX_INPUT = 256 * 1024
SLOW_SECONDS = 10.0
EXAMPLES_PER_KIND = 3
TOKENS = [
    "../",
    "..\\",
    "..%2f",
    "%252e%252e%252f",
    "/etc/passwd",
    "C:\\Windows\\",
    "\\\\host\\share\\",
    "\x00",
    "\n",
    "\r\n",
    "\nMEDIA:/etc/passwd\n",
    "[[audio_as_voice]]",
    "[end of image summary]",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\U000e0041",
    "\ud800",
    "\udfff",
    "CON",
    "nul.txt",
    " aux .txt",
    ". .",
    "=",
    "==",
    "-_",
    "+/",
    " \t\r\n",
    "data:image/png;base64,",
    "<svg><script>alert(1)</script></svg>",
    "A" * 300,
    "\u20ac" * 100,
]
BYTE_TOKENS = [
    b"\\u0000",
    b"\\ud800",
    b"\\udfff",
    b"\\u202e",
    b"\\n",
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"NaN",
    b"1e999",
    b"-0",
    b"9" * 40,
    b"\xff",
    b"\xc3",
    b"\xef\xbb\xbf",
    b'"type": "image"',
    b'"type": "resource"',
    b'"isError": true',
    b'"result": ',
]
MEDIA_PREFIXES = [
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff\xe0",
    b"GIF89a",
    b"BM",
    b"RIFF\x00\x00\x00\x00WEBP",
    b"II*\x00",
    b"MM\x00*",
    b"\x00\x00\x01\x00",
    b"RIFF\x24\x00\x00\x00WAVE",
    b"OggS",
    b"fLaC",
    b"\x00\x00\x00\x18ftypM4A ",
    b"\x1a\x45\xdf\xa3",
    b"ID3\x04",
    b"\xff\xfb\x90\x64",
    b"\xff\xf1",
    b"<svg",
    b"<html>",
    b"%PDF-1.4",
    b"PK\x03\x04",
]
BLOCK_TYPES = ["text", "image", "audio", "resource", "resource_link", "video", "", "IMAGE"]


def _small(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 16), (40, 90, 200)).save(out, format=fmt)
    return out.getvalue()


def benign_seeds() -> list[bytes]:
    """Well-formed results, so that mutations also explore the paths that store media."""
    b = build
    wav = b.wav()
    return [
        b.result(b.image(b.png(seed=3)), b.text("a chart")),
        b.result(b.image(b.jpeg(), "image/jpeg"), b.audio(wav)),
        b.result(b.image(b.many_frames_gif(4), "image/gif")),
        b.result(b.image(_small("TIFF"), "image/tiff"), b.image(_small("WEBP"), "image/webp")),
        b.result(b.image(b.progressive_jpeg_scan_bomb(side=96, scans=4), "image/jpeg")),
        b.result(b.image(b.tiff_tile_bomb(side=16, tile=64), "image/tiff")),
        b.result(b.audio(b.wav_header(channels=2, rate=8000, block_align=4, data=b"\x00" * 400))),
        b.result(b.audio(b"OggS\x00\x02" + b"\x00" * 20 + b"OpusHead" + b"\x00" * 64, "audio/ogg")),
        b.result(b.audio(b"ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x64" + b"\x00" * 64)),
        b.result(b.doc("file:///reports/q3.pdf"), b.link("file:///r/q3.xlsx", name="q3.xlsx")),
        b.result(
            {"type": "resource", "resource": {"uri": "notes://a", "text": "the notes"}},
            {"type": "image", "data": b.b64(b.png(seed=4)), "mime_type": "image/png"},
            structuredContent={"rows": [1, 2, 3]},
        ),
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "result": json.loads(b.result(b.text("x")))}
        ).encode(),
    ]


def corpus_seeds() -> list[bytes]:
    seeds = [c.file.read_bytes() for c in build.all_cases() if not c.generated]
    return seeds + benign_seeds()


class Mutator:
    def __init__(self, seeds: list[bytes], rng: random.Random) -> None:
        self.seeds = seeds
        self.rng = rng

    def input(self) -> str | bytes | Mapping[str, Any]:
        rng = self.rng
        data = rng.choice(self.seeds)
        for _ in range(rng.randint(1, 3)):
            mutate = self.structured if rng.random() < 0.8 else self.byte_level
            data = mutate(data)[:MAX_INPUT]
        if rng.random() < 0.08:
            try:
                parsed = json.loads(data)
            except (ValueError, RecursionError):
                return data
            if isinstance(parsed, dict):
                return self.python_types(parsed)
        if rng.random() < 0.5:
            try:
                return data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                pass
        return data

    def byte_level(self, data: bytes) -> bytes:
        rng = self.rng
        buf = bytearray(data)
        pos = rng.randrange(len(buf) + 1)
        op = rng.randrange(7)
        if op == 0 and buf:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif op == 1:
            del buf[pos:]
        elif op == 2:
            del buf[pos : pos + rng.randint(1, 64)]
        elif op == 3:
            buf[pos:pos] = rng.choice(BYTE_TOKENS)
        elif op == 4 and buf:
            start = rng.randrange(len(buf))
            buf[pos:pos] = buf[start : start + rng.randint(1, 256)]
        elif op == 5:
            other = rng.choice(self.seeds)
            start = rng.randrange(len(other))
            buf[pos:pos] = other[start : start + rng.randint(1, 512)]
        else:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        return bytes(buf)

    def structured(self, data: bytes) -> bytes:
        rng = self.rng
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return self.byte_level(data)
        if not isinstance(doc, dict):
            doc = {"content": [doc]}
        blocks = doc.get("content")
        op = rng.randrange(10)
        if isinstance(blocks, list):
            if op == 0:
                blocks[rng.randrange(len(blocks) + 1) :] = self.blocks_of_another()
            elif op == 1 and blocks:
                blocks.insert(rng.randrange(len(blocks) + 1), rng.choice(blocks))
            elif op == 2 and blocks:
                del blocks[rng.randrange(len(blocks))]
            elif op == 3:
                rng.shuffle(blocks)
            elif op == 4:
                self.random_base64(blocks)
            elif op == 5:
                self.damage_media(blocks)
        if op == 6:
            self.token_in_string(doc)
        elif op == 7:
            self.replace_node(doc)
        elif op == 8 and isinstance(blocks, list) and blocks:
            block = rng.choice(blocks)
            if isinstance(block, dict):
                block["type"] = rng.choice(BLOCK_TYPES)
        elif op == 9:
            self.envelope(doc)
        return self.dump(doc)

    def dump(self, doc: Any) -> bytes:
        ascii_only = self.rng.random() < 0.5
        try:
            return json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: only the escaped form exists
            return json.dumps(doc).encode("ascii")

    def blocks_of_another(self) -> list[Any]:
        try:
            other = json.loads(self.rng.choice(self.seeds))
        except (ValueError, RecursionError):
            return []
        while isinstance(other, dict) and "content" not in other and "result" in other:
            other = other["result"]
        content = other.get("content") if isinstance(other, dict) else None
        return content if isinstance(content, list) else []

    def _media_fields(self, blocks: list[Any]) -> list[tuple[dict[str, Any], str]]:
        found = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("data"), str):
                found.append((block, "data"))
            resource = block.get("resource")
            if isinstance(resource, dict) and isinstance(resource.get("blob"), str):
                found.append((resource, "blob"))
        return found

    def random_base64(self, blocks: list[Any]) -> None:
        rng = self.rng
        fields = self._media_fields(blocks)
        if not fields:
            kind = rng.choice(["image", "audio"])
            block: dict[str, Any] = {"type": kind, "data": "", "mimeType": f"{kind}/png"}
            blocks.append(block)
            fields = [(block, "data")]
        owner, key = rng.choice(fields)
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
        if rng.random() < 0.6:
            raw = rng.choice(MEDIA_PREFIXES) + raw
        text = base64.b64encode(raw).decode("ascii")
        style = rng.randrange(6)
        if style == 0:
            text = text.replace("+", "-").replace("/", "_")
        elif style == 1:
            text = text.rstrip("=")
        elif style == 2:
            text = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
        elif style == 3:
            alphabet = "ABCxyz019+/-_= \n%!\u00e9"
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        owner[key] = text

    def damage_media(self, blocks: list[Any]) -> None:
        rng = self.rng
        fields = self._media_fields(blocks)
        if not fields:
            return
        owner, key = rng.choice(fields)
        try:
            raw = base64.b64decode(owner[key] + "==", validate=False)
        except ValueError:
            return
        if rng.random() < 0.6:
            damaged = mutate_media(raw, rng)  # PNG chunks, JPEG segments, TIFF IFDs, WAV
            if damaged == raw:
                damaged = self.byte_level(raw)
        else:
            damaged = self.byte_level(raw)
        owner[key] = base64.b64encode(damaged[: MAX_INPUT // 2]).decode("ascii")

    def _strings(self, doc: Any) -> list[tuple[Any, Any]]:
        slots: list[tuple[Any, Any]] = []
        stack = [doc]
        while stack:
            item = stack.pop()
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for k, v in pairs:
                if isinstance(v, str):
                    slots.append((item, k))
                elif isinstance(v, dict | list):
                    stack.append(v)
        return slots

    def token_in_string(self, doc: dict[str, Any]) -> None:
        rng = self.rng
        slots = self._strings(doc)
        if not slots:
            return
        owner, key = rng.choice(slots)
        value: str = owner[key]
        pos = rng.randrange(len(value) + 1)
        owner[key] = value[:pos] + rng.choice(TOKENS) + value[pos:]

    def replace_node(self, doc: dict[str, Any]) -> None:
        rng = self.rng
        slots: list[tuple[Any, Any]] = []
        stack: list[Any] = [doc]
        while stack:
            item = stack.pop()
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for k, v in pairs:
                slots.append((item, k))
                if isinstance(v, dict | list):
                    stack.append(v)
        if slots:
            owner, key = rng.choice(slots)
            owner[key] = self.random_value(2)

    def random_value(self, budget: int) -> Any:
        rng = self.rng
        pick = rng.randrange(9 if budget > 0 else 6)
        if pick == 0:
            return None
        if pick == 1:
            return rng.random() < 0.5
        if pick == 2:
            return rng.choice([0, -1, 1, 2**31, 2**63, -(2**63), 10**30])
        if pick == 3:
            return rng.choice([0.5, -0.0, 1e308, float("inf"), float("nan")])
        if pick == 4:
            return "".join(chr(rng.randrange(0x11_0000)) for _ in range(rng.randint(0, 12)))
        if pick == 5:
            return rng.choice(TOKENS) * rng.randint(1, 3)
        if pick == 6:
            return [self.random_value(budget - 1) for _ in range(rng.randint(0, 3))]
        if pick == 7:
            return {rng.choice(["type", "data", "uri", "x"]): self.random_value(budget - 1)}
        return {"type": rng.choice(BLOCK_TYPES), "data": self.random_value(0)}

    def envelope(self, doc: dict[str, Any]) -> None:
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0:
            doc["isError"] = rng.choice([True, False, "true", 1, None])
        elif choice == 1:
            doc["structuredContent"] = self.random_value(3)
        elif choice == 2:
            inner = dict(doc)
            doc.clear()
            doc.update({"jsonrpc": "2.0", "id": rng.randrange(100), "result": inner})
        else:
            doc["_meta"] = self.random_value(2)

    def python_types(self, doc: dict[str, Any]) -> Mapping[str, Any]:
        """An already-parsed result holding what JSON cannot: tuples, bytes, deep wrappers."""
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0 and isinstance(doc.get("content"), list):
            doc["content"] = tuple(doc["content"])
        elif choice == 1:
            blocks = doc.get("content")
            if isinstance(blocks, list) and blocks and isinstance(blocks[0], dict):
                blocks[0]["data"] = b"\x89PNG"
        elif choice == 2:
            value: dict[str, Any] = doc
            for _ in range(rng.choice([2, 10, 1200])):
                value = {"result": value}
            return value
        return doc


@dataclass
class Report:
    inputs: int = 0
    failures: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    markers: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)  # not failures, worth a look
    kinds: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    slowest: tuple[float, int] = (0.0, -1)

    def merge(self, other: Report) -> None:
        self.inputs += other.inputs
        self.failures += other.failures
        self.outcomes.update(other.outcomes)
        self.markers.update(other.markers)
        self.notes.update(other.notes)
        self.kinds.update(other.kinds)
        for kind, found in other.examples.items():
            mine = self.examples.setdefault(kind, [])
            mine.extend(found[: EXAMPLES_PER_KIND - len(mine)])
        self.slowest = max(self.slowest, other.slowest)


def _kind(problem: str) -> str:
    return problem.split(":", 1)[0][:60]


class Sandbox:
    """A cache root and a watched `outside` folder; the process works inside it."""

    def __init__(self, base: Path) -> None:
        self.top = Path(tempfile.mkdtemp(prefix="fuzz-ingest-", dir=base))
        self.root = self.top / "cache"
        self.away = self.top / "outside"
        self.away.mkdir()
        (self.away / "canary.txt").write_text("must not change")
        (self.away / "audio_target").mkdir()
        self.cache = MediaCache(self.root, CacheLimits(max_blob_bytes=build.MAX_BLOB_BYTES))
        self.planted: dict[Path, str] = {}
        self.before = snapshot(self.top, exclude=self.root)

    def reset(self, round_no: int) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.planted = {}
        if round_no % 4 == 3:
            self.root.mkdir(mode=0o700)
            link = self.root / "audio"
            link.symlink_to(self.away / "audio_target")
            self.planted[link] = str(self.away / "audio_target")

    def check(self) -> list[str]:
        problems = check_cache_tree(self.root, self.planted)
        return problems + diff_snapshots(self.before, snapshot(self.top, exclude=self.root))

    def close(self) -> None:
        shutil.rmtree(self.top, ignore_errors=True)


def one_input(seeds: list[bytes], seed: int, index: int) -> str | bytes | Mapping[str, Any]:
    return Mutator(seeds, random.Random(f"{seed}:{index}")).input()


def run_share(
    seed: int, indices: range, base: str, wipe_every: int, artifacts: str | None
) -> Report:
    seeds = corpus_seeds()
    audit = FileAudit.get()
    box = Sandbox(Path(base))
    report = Report()
    cwd = os.getcwd()
    os.chdir(box.top)  # a relative write would land here, where it is seen
    try:
        for count, index in enumerate(indices):
            if count % wipe_every == 0:
                if count:
                    _record(report, index, box.check(), None, artifacts, seed)
                box.reset(count // wipe_every)
            doc = one_input(seeds, seed, index)
            problems, outcome, elapsed = _check_one(doc, box, audit, report)
            report.inputs += 1
            report.outcomes[outcome] += 1
            report.slowest = max(report.slowest, (elapsed, index))
            if elapsed > SLOW_SECONDS:
                problems.append(f"slow: {elapsed:.1f} s for one input")
            _record(report, index, problems, doc, artifacts, seed)
        _record(report, indices.stop, box.check(), None, artifacts, seed)
    finally:
        os.chdir(cwd)
        box.close()
    return report


def _check_one(
    doc: str | bytes | Mapping[str, Any], box: Sandbox, audit: FileAudit, report: Report
) -> tuple[list[str], str, float]:
    problems: list[str] = []
    started = time.perf_counter()
    with audit.watch() as events, warnings.catch_warnings(record=True) as warned:
        try:
            out = ingest(doc, cache=box.cache, server="fuzz")
        except InvalidToolResult:
            out = None
            outcome = "invalid"
        except Exception as exc:
            out = None
            outcome = "crash"
            problems.append(f"exception {type(exc).__name__}: {str(exc)[:200]}")
    elapsed = time.perf_counter() - started
    for w in warned:
        report.notes[f"warning {w.category.__name__}: {str(w.message)[:70]}"] += 1
    problems += outside(events, box.root)
    if out is not None:
        outcome = "markers" if out.markers else "clean"
        for m in out.markers:
            report.markers[m.reason.value] += 1
            if m.reason is MarkerReason.CACHE_ERROR:
                report.notes[f"cache_error: {m.message[:70]}"] += 1
        problems += check_rendered(out, box.root, input_text_lines(doc))
    return problems, outcome, elapsed


def _record(
    report: Report,
    index: int,
    problems: list[str],
    doc: str | bytes | Mapping[str, Any] | None,
    artifacts: str | None,
    seed: int,
) -> None:
    if not problems:
        return
    report.failures += 1
    for problem in problems:
        kind = _kind(problem)
        report.kinds[kind] += 1
        shown = report.examples.setdefault(kind, [])
        if len(shown) < EXAMPLES_PER_KIND:
            shown.append(f"input {index}: {problem[:300]}")
    if artifacts and doc is not None and not isinstance(doc, Mapping):
        folder = Path(artifacts)
        folder.mkdir(parents=True, exist_ok=True)
        raw = doc if isinstance(doc, bytes) else doc.encode("utf-8", "surrogatepass")
        (folder / f"seed{seed}-input{index}.json").write_bytes(raw)


def default_base() -> str:
    shm = "/dev/shm"  # fsync is free on tmpfs; the cache fsyncs every blob
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


def run(
    count: int,
    *,
    seed: int = 1,
    jobs: int = 1,
    base: str | None = None,
    wipe_every: int = 500,
    artifacts: str | None = None,
) -> Report:
    base = base or default_base()
    shares = [range(j, count, jobs) for j in range(jobs)]
    report = Report()
    if jobs == 1:
        report.merge(run_share(seed, shares[0], base, wipe_every, artifacts))
        return report
    with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
        futures = [
            pool.submit(run_share, seed, share, base, wipe_every, artifacts) for share in shares
        ]
        for future in futures:
            report.merge(future.result())
    return report


def summary(report: Report, seconds: float) -> str:
    lines = [f"fuzz: {report.inputs} inputs, {report.failures} failures, {seconds:.1f} s"]
    lines.append("  outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(report.outcomes.items())))
    lines.append("  markers: " + ", ".join(f"{k}={v}" for k, v in sorted(report.markers.items())))
    lines.append(f"  slowest input: {report.slowest[0] * 1000:.0f} ms (input {report.slowest[1]})")
    lines += [f"  note {n} x {note}" for note, n in report.notes.most_common(8)]
    for kind, n in report.kinds.most_common():
        lines.append(f"  FAIL {n} x {kind}")
        lines += [f"      {example}" for example in report.examples.get(kind, [])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--dir", help="where the sandbox goes (default /dev/shm, else tmp)")
    parser.add_argument("--wipe-every", type=int, default=500)
    parser.add_argument("--artifacts", help="write failing inputs to this folder")
    parser.add_argument("--only", type=int, help="print input INDEX (for replay) and exit")
    args = parser.parse_args(argv)
    if args.only is not None:
        doc = one_input(corpus_seeds(), args.seed, args.only)
        shown = doc if isinstance(doc, str | bytes) else repr(doc)[:2000]
        print(shown if isinstance(shown, str) else shown.decode("utf-8", "backslashreplace"))
        return 0
    started = time.monotonic()
    report = run(
        args.count,
        seed=args.seed,
        jobs=args.jobs,
        base=args.dir,
        wipe_every=args.wipe_every,
        artifacts=args.artifacts,
    )
    print(summary(report, time.monotonic() - started), flush=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
