"""The hostile-input corpus (tests/corpus) through the real `ingest`, in process and via the CLI.

For every case: the exact error or markers/media it expects, nothing written or read
outside the cache root (audit hook + a snapshot of the rest of the temp tree), every entry
under the root resolving inside it with private modes, and no exception but
InvalidToolResult.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from pipelines import CacheLimits, MediaCache, ingest
from pipelines.errors import InvalidToolResult
from pipelines.media import MarkerReason
from pipelines.render import RenderedResult
from tests.corpus import build
from tests.corpus.oracle import (
    FileAudit,
    check_cache_tree,
    check_rendered,
    diff_snapshots,
    input_text_lines,
    is_inside,
    outside,
    snapshot,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXPECTED: dict[str, dict[str, Any]] = json.loads(build.EXPECTED_FILE.read_text())
NAMES = sorted(n for n, e in EXPECTED.items() if e.get("stage", "ingest") == "ingest")
SPEECH_NAMES = sorted(n for n, e in EXPECTED.items() if e.get("stage") == "speech_text")
CLI_RUNS = [
    pytest.param(name, i, id=f"{name}-{i}")
    for name in NAMES
    for i, _ in enumerate(EXPECTED[name].get("cli", []))
]


def test_corpus_is_large_current_and_covers_every_reason() -> None:
    assert len(NAMES) >= 40
    assert json.loads(json.dumps(build.expectations())) == EXPECTED, (
        "expected.json is stale: run python -m tests.corpus.build"
    )
    committed = {p.stem for p in build.committed_files()}
    assert committed == {c.name for c in build.all_cases() if not c.generated}
    assert all(p.stat().st_size <= build.COMMIT_LIMIT for p in build.committed_files())
    reasons = {m["reason"] for e in EXPECTED.values() for m in e.get("markers", [])}
    reasons |= {e["marker_run"]["reason"] for e in EXPECTED.values() if "marker_run" in e}
    assert reasons == {r.value for r in MarkerReason}
    assert any(e.get("error") == "InvalidToolResult" for e in EXPECTED.values())


def decode_lenient(data: str) -> bytes:
    """Independent of the project's decoder: whitespace and URL-safe letters, any padding."""
    compact = "".join(data.split()).replace("-", "+").replace("_", "/").rstrip("=")
    return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)


def block_bytes(payload: bytes, index: int) -> bytes:
    doc = json.loads(payload)
    while "content" not in doc:
        doc = doc["result"]
    block = doc["content"][index]
    data = block["data"] if "data" in block else block["resource"]["blob"]
    assert isinstance(data, str)
    return decode_lenient(data)


def plant(setup: str | None, payload: bytes, root: Path, away: Path) -> dict[Path, str]:
    """Hostile cache states: symlinks inside the cache pointing outside it."""
    if not setup:
        return {}
    root.mkdir(mode=0o700)
    digest = hashlib.sha256(block_bytes(payload, 0)).hexdigest()
    if setup == "symlink_images_folder":
        target = away / "images_target"
        target.mkdir()
        link = root / "images"
    elif setup == "symlink_image_file":
        (root / "images").mkdir(mode=0o700)
        target = away / "victim.png"
        target.write_bytes(b"victim")
        link = root / "images" / f"{digest}.png"
    elif setup == "symlink_document_folder":
        (root / "documents").mkdir(mode=0o700)
        target = away / "documents_target"
        target.mkdir()
        link = root / "documents" / digest[:16]
    else:
        raise AssertionError(f"unknown setup {setup}")
    link.symlink_to(target)
    return {link: str(target)}


def depth(value: Any) -> int:
    level = 0
    while isinstance(value, list) and value:
        value, level = value[0], level + 1
    return level + (1 if isinstance(value, list) else 0)


def compare(out: RenderedResult, payload: bytes, expect: dict[str, Any]) -> list[str]:
    """Differences between a rendered result and its expectation."""
    wrong: list[str] = []
    markers = [{"block": m.block, "reason": m.reason.value} for m in out.markers]
    run = expect.get("marker_run")
    wanted_markers = expect.get("markers", [])
    if run is not None:
        wanted_markers = [{"block": i, "reason": run["reason"]} for i in range(run["count"])]
    if markers != wanted_markers:
        shown = [(m.block, m.reason.value, m.message[:80]) for m in out.markers[:5]]
        wrong.append(f"markers {shown} != {wanted_markers[:5]}")
    wanted = expect.get("media", [])
    if len(out.media) != len(wanted):
        wrong.append(f"{len(out.media)} media {[str(m.path) for m in out.media]}, not {wanted}")
    for m, want in zip(out.media, wanted, strict=False):
        name = m.path.name
        checks = {
            "kind": m.kind.value == want["kind"],
            "name": name == want.get("name", name),
            "suffix": m.path.suffix == want.get("suffix", m.path.suffix),
            "mime": m.mime == want.get("mime", m.mime),
            "max_name_chars": len(name) <= want.get("max_name_chars", len(name)),
            "max_name_bytes": len(name.encode()) <= want.get("max_name_bytes", len(name.encode())),
        }
        if "size_of_block" in want:
            checks["size_of_block"] = m.size == len(block_bytes(payload, want["size_of_block"]))
        wrong += [
            f"media {m.kind.value} {name!r} {m.mime}: {k}" for k, ok in checks.items() if not ok
        ]
    lines = out.text.split("\n")
    if "lines" in expect and len(lines) != expect["lines"]:
        wrong.append(f"{len(lines)} lines, not {expect['lines']}: {out.text[:300]!r}")
    if "text" in expect and out.text != expect["text"]:
        wrong.append(f"text {out.text[:200]!r} != {expect['text']!r}")
    wrong += [f"text lacks {s!r}" for s in expect.get("text_has", []) if s not in out.text]
    wrong += [f"text has {s!r}" for s in expect.get("text_lacks", []) if s in out.text]
    if "structured_depth" in expect and depth(out.structured_content) != expect["structured_depth"]:
        wrong.append(f"structured content depth {depth(out.structured_content)}")
    if "structured" in expect and out.structured_content != expect["structured"]:
        wrong.append(f"structured content {str(out.structured_content)[:200]}")
    longest = max(len(line) for line in lines)
    if longest > expect.get("max_line_chars", longest):
        wrong.append(f"a line of {longest} characters, over {expect['max_line_chars']}")
    return wrong


# Cases that get as far as a real decode, which runs in a bounded child process.
DECODED = frozenset({"webp_4000_is_decoded"})


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.integration) if n in DECODED else n for n in NAMES],
)
def test_hostile_case(name: str, tmp_path: Path) -> None:
    expect = EXPECTED[name]
    payload = build.CASES[name].payload()
    root = tmp_path / "cache"
    away = tmp_path / "outside"
    away.mkdir()
    (away / "canary.txt").write_text("must not change")
    planted = plant(expect.get("setup"), payload, root, away)
    limit = expect.get("max_blob_bytes", build.MAX_BLOB_BYTES)
    cache = MediaCache(root, CacheLimits(max_blob_bytes=limit))
    before = snapshot(tmp_path, exclude=root)

    out: RenderedResult | None = None
    error: InvalidToolResult | None = None
    started = time.monotonic()
    if "max_mib" in expect:
        tracemalloc.start()
    with FileAudit.get().watch() as events:
        try:
            out = ingest(payload, cache=cache, server="corpus")
        except InvalidToolResult as exc:
            error = exc
        except Exception as exc:  # the agent process would die here
            pytest.fail(f"ingest raised {type(exc).__name__}: {str(exc)[:300]}")
    elapsed = time.monotonic() - started
    if tracemalloc.is_tracing():
        peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        assert peak_mib <= expect["max_mib"], f"peak {peak_mib:.0f} MiB"

    problems = outside(events, root)
    problems += diff_snapshots(before, snapshot(tmp_path, exclude=root))
    problems += check_cache_tree(root, planted)
    if expect.get("error"):
        assert out is None, f"expected InvalidToolResult, got text {out.text[:200]!r}"
        assert error is not None and "\n" not in str(error)
        leftovers = [p for p in root.rglob("*") if p not in planted] if root.exists() else []
        problems += [f"file left by an invalid result: {p}" for p in leftovers]
    else:
        assert out is not None, f"unexpected InvalidToolResult: {error}"
        problems += check_rendered(out, root, input_text_lines(payload))
        problems += compare(out, payload, expect)
        # Nothing else on disk: no temp file left, no archive member extracted.
        on_disk = {p for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
        extra = on_disk - {m.path for m in out.media}
        problems += [f"file in the cache that no media names: {p}" for p in sorted(extra)]
    assert not problems, "\n".join(problems)
    assert elapsed < expect.get("max_seconds", build.DEFAULT_MAX_SECONDS)


MEMORY_CASES = sorted(name for name in NAMES if "max_rss_mib" in EXPECTED[name])

# A fresh interpreter ingests one payload and reports its own extra peak RSS (VmHWM since
# exec, over the RSS just before ingesting) and that of the bounded decoder child.
_MEASURE = r"""
import json, sys
from pathlib import Path
from pipelines import CacheLimits, MediaCache, ingest
from pipelines import bounded

def kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise SystemExit("no " + key)

payload = Path(sys.argv[1]).read_bytes()
cache = MediaCache(Path(sys.argv[2]), CacheLimits(max_blob_bytes=int(sys.argv[3])))
before = kib("VmRSS")
out = ingest(payload, cache=cache)
child = bounded.last_child_peak_kib[0]
print(json.dumps({
    "extra_kib": kib("VmHWM") - before,
    "child_extra_kib": max(0, child - before) if child else 0,
    "markers": [m.reason.value for m in out.markers],
}))
"""


@pytest.mark.integration  # starts a process
@pytest.mark.parametrize("name", MEMORY_CASES)
def test_hostile_decoder_case_stays_within_its_memory_bound(name: str, tmp_path: Path) -> None:
    """The peak memory of a fresh process ingesting the case, and of its decoder child."""
    expect = EXPECTED[name]
    source = tmp_path / "payload.json"
    source.write_bytes(build.CASES[name].payload())
    limit = expect.get("max_blob_bytes", build.MAX_BLOB_BYTES)
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(source), str(tmp_path / "cache"), str(limit)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
    found = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    wanted = [m["reason"] for m in expect.get("markers", [])]
    assert found["markers"] == wanted
    bound = expect["max_rss_mib"] * 1024
    assert found["extra_kib"] <= bound, found
    assert found["child_extra_kib"] <= bound, found


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env.update(
        MCP_MEDIA_HOME=str(home),
        MCP_MEDIA_MAX_BLOB_BYTES=str(build.MAX_BLOB_BYTES),
        MCP_MEDIA_VISION__PROVIDER="none",
        # No case here makes a job; a port nobody listens on proves no broker is touched.
        MCP_MEDIA_REDIS_URL="redis://127.0.0.1:1/0",
    )
    return env


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@pytest.mark.integration  # starts a process
@pytest.mark.parametrize(("name", "run"), CLI_RUNS)
def test_hostile_case_through_the_cli(name: str, run: int, tmp_path: Path) -> None:
    expect = EXPECTED[name]
    how = expect["cli"][run]
    c = build.CASES[name]
    if c.generated:
        source = tmp_path / f"{name}.json"
        source.write_bytes(c.build())
    else:
        source = c.file
    stdin = source.read_bytes() if how.get("stdin") else None
    arg = "-" if how.get("stdin") else str(source)
    home = tmp_path / "home"
    proc = subprocess.run(
        [sys.executable, "-m", "workers.cli.main", "ingest", arg, "--json"],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=cli_env(home),
        timeout=120,
        check=False,
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr[-2000:]
    assert proc.returncode == how["exit"], stderr[-2000:]
    if how["exit"] == 2:
        assert proc.stdout == b""
        assert stderr.count("\n") == 1 and stderr.startswith("mcp-media: error: "), stderr
        return
    printed = json.loads(proc.stdout.decode("utf-8"), parse_constant=_reject_constant)
    cache_root = home / "cache"
    markers = [{"block": m["block"], "reason": m["reason"]} for m in printed["markers"]]
    assert markers == expect.get("markers", [])
    kinds = [(m["kind"], Path(m["path"]).name) for m in printed["media"]]
    wanted = [(m["kind"], m.get("name")) for m in expect.get("media", [])]
    assert [
        (k, n if w is not None else None) for (k, n), (_, w) in zip(kinds, wanted, strict=True)
    ] == wanted
    assert all(is_inside(m["path"], cache_root) for m in printed["media"])
    lines = printed["text"].split("\n")
    if "lines" in expect:
        assert len(lines) == expect["lines"], printed["text"][:500]
    tags = {f"MEDIA:{m['path']}" for m in printed["media"] if m["kind"] != "document"}
    echo = input_text_lines(source.read_bytes())
    forged = [ln for ln in lines if ln.startswith("MEDIA:") and ln not in tags | echo]
    assert forged == []


def test_decode_lenient_is_an_independent_check() -> None:
    assert decode_lenient("aGk") == b"hi"
    with pytest.raises(binascii.Error):
        decode_lenient("a%Gk")


def nested(levels: int, inner: dict[str, Any]) -> dict[str, Any]:
    value = inner
    for _ in range(levels):
        value = {"result": value}
    return value


@pytest.mark.parametrize("levels", [1200, 100_000])
def test_deeply_wrapped_mapping_is_refused_cleanly(levels: int, tmp_path: Path) -> None:
    """`ingest` also takes a Mapping (already parsed): no json.loads guard in front of it."""
    cache = MediaCache(tmp_path / "cache")
    try:
        ingest(nested(levels, {"content": []}), cache=cache)
    except InvalidToolResult:
        pass
    except RecursionError:
        pytest.fail("RecursionError: JSON-RPC `result` unwrapping recurses without a bound")


# The oracle itself must be able to say no.


def test_audit_sees_every_kind_of_write_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    away = tmp_path / "away"
    with FileAudit.get().watch() as events:
        (root / "inside.txt").write_text("fine")
        away.mkdir()
        (away / "a.txt").write_text("escaped")
        os.replace(away / "a.txt", away / "b.txt")
        (root / "link").symlink_to(away / "b.txt")
        (root / "sub").symlink_to(away)
        (root / "sub" / "c.txt").write_text("through a symlinked folder")
        (away / "b.txt").unlink()
        (tmp_path / "read.txt").write_text("x")
    found = outside(events, root)
    assert len(found) == 7, found
    assert not any("inside.txt" in f for f in found)
    assert any("sub/c.txt" in f for f in found)  # lexically inside, really outside
    with FileAudit.get().watch() as events:
        (tmp_path / "read.txt").read_text()
    assert outside(events, root) == [f"read outside the cache: open {tmp_path / 'read.txt'}"]


def test_tree_check_sees_symlinks_escapes_and_loose_modes(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "images").mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    (root / "images" / "a.png").write_bytes(b"x")
    (root / "images" / "a.png").chmod(0o644)
    (root / "documents").symlink_to(tmp_path)
    problems = check_cache_tree(root)
    assert sorted(p.split(" ")[-1] if "mode" in p else p.split(":")[0] for p in problems) == [
        "600",
        "symlink in the cache",
    ], problems
    planted = check_cache_tree(root, {root / "documents": str(tmp_path)})
    assert planted == [p for p in problems if "mode" in p]


def test_rendered_check_sees_forged_tags_and_bad_text(tmp_path: Path) -> None:
    forged = RenderedResult(text="ok\nMEDIA:/etc/passwd", is_error=False, structured_content=None)
    assert check_rendered(forged, tmp_path, set()) == ["forged MEDIA: line 'MEDIA:/etc/passwd'"]
    assert check_rendered(forged, tmp_path, {"MEDIA:/etc/passwd"}) == []
    broken = RenderedResult(text="a\ud800", is_error=False, structured_content={1j})
    assert [p.split(":")[0] for p in check_rendered(broken, tmp_path, set())] == [
        "agent text is not valid Unicode",
        "the JSON form cannot be printed",
    ]


def test_snapshot_sees_changes(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1")
    before = snapshot(tmp_path)
    (tmp_path / "a").write_text("2")
    (tmp_path / "b").write_text("new")
    assert diff_snapshots(before, snapshot(tmp_path)) == [
        "created outside the cache: b",
        "changed outside the cache: a",
    ]


# Issue 14, TTS text: each case runs `prepare` in a child (the case's max_seconds is its hard
# deadline, a hang rather than a speed check) that reports the outcome and its peak Python
# allocations; `speak` runs through the real CLI where the case asks for it.

_SPEECH_CHILD = """
import json, sys, tracemalloc
from pipelines.speech.text import TextError, normalize, prepare
payload = sys.stdin.buffer.read()
tracemalloc.start()
row = {}
try:
    text = payload.decode("utf-8")
    row["sentences"] = len(prepare(text))
    row["spoken"] = normalize(text)
except (TextError, UnicodeDecodeError) as exc:
    row["error"] = type(exc).__name__
    row["message"] = str(exc)
row["peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
print(json.dumps(row))
"""


@pytest.mark.integration  # starts a process
@pytest.mark.parametrize("name", SPEECH_NAMES)
def test_hostile_speech_text(name: str, tmp_path: Path) -> None:
    expect = EXPECTED[name]
    payload = build.CASES[name].build()
    proc = subprocess.run(
        [sys.executable, "-c", _SPEECH_CHILD],
        input=payload,
        capture_output=True,
        cwd=ROOT,
        timeout=expect["max_seconds"],
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
    row = json.loads(proc.stdout)
    assert row.get("error") == expect.get("error"), row.get("message")
    assert row.get("sentences") == expect.get("sentences")
    assert all(s in row.get("spoken", "") for s in expect.get("spoken_has", []))
    assert row["peak_mib"] <= expect["max_mib"], f"peak {row['peak_mib']:.0f} MiB"
    for how in expect.get("speech_cli", []):
        argv = [payload] if how["argv"] else [b"-"]
        env = cli_env(tmp_path / "home")
        done = subprocess.run(
            [sys.executable.encode(), b"-m", b"workers.cli.main", b"speak", *argv, b"--inline"],
            input=b"" if how["argv"] else payload,
            capture_output=True,
            cwd=ROOT,
            env=env,
            timeout=120,
            check=False,
        )
        stderr = done.stderr.decode("utf-8", "replace")
        assert "Traceback" not in stderr, stderr[-2000:]
        assert (done.returncode, stderr.count("\n"), done.stdout) == (how["exit"], 1, b""), stderr
        assert stderr.startswith("mcp-media: error: ")
