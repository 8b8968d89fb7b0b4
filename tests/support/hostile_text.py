"""Adversarial text for every text stage, and a child-process runner with a hard deadline.

The inputs repeat every character class the text rules match on (markdown, HTML, URL and
number syntax, whitespace, zero-width and tag characters), pairs of them, nested markdown
and long digit runs, each exactly `size` characters long (20,000 by default: the TTS limit).

`run_stage` runs one stage over all inputs in a child process (`python -m
tests.support.hostile_text STAGE`), which reports each input before and after it runs; the
parent kills the child when one input is still running after `timeout` seconds. A regex
cannot be interrupted in-process (it holds the GIL), hence the child.

    python -m tests.support.hostile_text --report [--timeout 30] [STAGE...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

SIZE = 20_000
ROOT = Path(__file__).resolve().parents[2]

# Every character some text rule matches on, one at a time and in pairs.
SINGLE = (
    "\n \t\r#*_~`[]()!<>-|:.,;/\\@$€£%&=+'\"?^{}•–—−×…≈→±0159xaA"
    "\u200b\u200d\u202e\ufeff\U000e0041😀©°"
    "年月日号点，。！？；：、％¥中"
)
PAIRED = "\n #*_~`[]()!<>-|.:@$1"
UNITS = (
    # markdown, nested and broken
    "**a ",
    "**a",
    "*a ",
    "_a ",
    "__a",
    "~~a ",
    "`a",
    "![a](",
    "[a](",
    "[a][",
    "[a]: ",
    "](",
    "<!--",
    "<a ",
    "</a",
    "> ",
    ">",
    "- ",
    "- [ ] ",
    "1. ",
    "1) ",
    "| --- ",
    "|:-",
    "```\n",
    "~~~",
    "# ",
    "#a",
    "#1 ",
    "* * ",
    "**_~~`[",
    "`~~_**]",
    # addresses
    "a@",
    "a.",
    "a@b.",
    "a@b.c",
    "www.",
    "http://a",
    "a.com/",
    "a.com",
    "a-",
    "a_",
    # numbers, money, dates, times, units
    "9",
    "1,",
    "1,000",
    "1.",
    "1.5",
    "1:00 ",
    "12:3",
    "1 pm ",
    "12/12/2012 ",
    "1/2 ",
    "1/",
    "1-",
    "1 - ",
    "1x",
    "1 x ",
    "1*",
    "-1",
    "$1",
    "$1.",
    "$1,",
    "USD 1",
    "1 € ",
    "1%",
    "1k ",
    "1st ",
    "1990s ",
    "'90s ",
    "1 km ",
    "1°",
    "No. 1 ",
    "Jan. 1 ",
    "January 1, 2020 ",
    "1 March ",
    "in 1999 ",
    "2020-01-01 ",
    "007 ",
    # Chinese numbers, dates, times, money, sentences
    "2026年",
    "12月2日",
    "1月",
    "2026-1-1",
    "3:30",
    "3：30",
    "¥1,",
    "￥1.5",
    "12.5%",
    "１２",
    "中文，",
    "中。",
    # abbreviations and symbols
    "Dr. ",
    "e.g.",
    "U.S.",
    "Mr.",
    "C++",
    " & ",
    "a+b",
    " = ",
    "a/b",
    " @ ",
    # agent-facing syntax
    "MEDIA:",
    "\nMEDIA :",
    "ＭＥＤＩＡ:",
    "M\u200bEDIA:",
    "[[a]]",
    "[[",
    "]]",
    # sentences
    "A. ",
    "a? ",
    '." ',
    "(wind) ",
    "♪",
)
PROSE = (
    "The quarterly report shows revenue of $1,234.56 on 2026-12-02 at 10:30 am, up 12% "
    "from Q3; see https://example.com/report or mail finance@example.com. "
)


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def inputs(size: int = SIZE) -> dict[str, str]:
    """Label -> an adversarial text of exactly `size` characters."""
    out: dict[str, str] = {}
    for ch in SINGLE:
        out[f"{ch!r}*n"] = ch * size
        out[f"{ch!r}*n+x"] = ch * (size - 1) + "x"
        out[f"x+{ch!r}*n"] = "x" + ch * (size - 1)
    for a in PAIRED:
        for b in PAIRED:
            if a != b:
                out[f"({a + b!r})*n"] = _fill(a + b, size)
    for unit in UNITS:
        out[f"({unit!r})*n"] = _fill(unit, size)
        out[f"({unit!r})*n+x"] = _fill(unit, size - 1) + "x"
    half = size // 2
    out["'# a'+' '*n+'b'"] = "# a" + " " * (size - 4) + "b"
    out["'\\n'*n+'x'"] = "\n" * (size - 1) + "x"
    out["'['*n/2+']'*n/2"] = "[" * half + "]" * (size - half)
    out["'**'*k+'a'+'**'*k"] = "**" * (half // 2) + "a" + "**" * ((size - half - 1) // 2)
    out["nested markdown"] = _fill("> - **_[`~~a~~`](b)_** ", size)
    out["'$'+'9'*4400"] = "$" + "9" * 4400
    out["'9'*5000"] = "9" * 5000
    out["'$'+'9'*n"] = "$" + "9" * (size - 1)
    out["'9'*n+'th'"] = "9" * (size - 2) + "th"
    out["'9'*n+'%'"] = "9" * (size - 1) + "%"
    out["'-'+'9'*n"] = "-" + "9" * (size - 1)
    out["'9'*n+'.9'"] = "9" * (size - 2) + ".9"
    out["'0.'+'9'*n"] = "0." + "9" * (size - 2)
    out["4,000-digit numbers in prose"] = _fill("Call " + "9" * 4000 + " now. ", size)
    out["prose"] = _fill(PROSE, size)
    return out


# The stages: every function that takes untrusted text. Each is called with one input; a
# refusal the stage documents (TextError) is an outcome, anything else is a failure.


def _stages() -> dict[str, Callable[[str], object]]:
    from pipelines import names, render, vision
    from pipelines.blocks import ResourceLink
    from pipelines.speech import stt, text, text_zh

    def link(value: str) -> str:
        block = ResourceLink(value, value, value, value, value, None)
        return render.resource_link(block, value)

    stages: dict[str, Callable[[str], object]] = {
        "text.strip_markdown": text.strip_markdown,
        "text.strip_emoji": text.strip_emoji,
        "text.prepare": text.prepare,
        "text.split_sentences": text.split_sentences,
        "text.number_text": lambda s: text.number_text(s) if s.isdecimal() else None,
        "text_zh.prepare_zh": text_zh.prepare_zh,
        "text_zh.split_sentences_zh": text_zh.split_sentences_zh,
        "stt.clean": stt._clean,
        "render.clean_text": render.clean_text,
        "render.one_line": render.one_line,
        "render.wrap_untrusted": lambda s: render.wrap_untrusted("vision.summarize", s),
        "render.resource_link": link,
        "names.safe_document_name": lambda s: names.safe_document_name(s, s, None),
        "vision.clean_text": lambda s: vision.clean_text(s, 4000),
        "render.neutralize": render.neutralize,
        "render.json_safe": lambda s: render.json_safe({s: [s, float("nan")]}),
        # Not a stage: the cubic heading rule before issue 14, to prove the runner can fail.
        "reference.cubic_heading": re.compile(r"(?m)^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$").search,
    }
    return stages


@dataclass(frozen=True, slots=True)
class Run:
    stage: str
    label: str
    seconds: float | None  # None: still running at the deadline (the child was killed)
    outcome: str  # "ok", a refusal ("TextTooLongError: ..."), or "error: ..." (a failure)


@dataclass(frozen=True, slots=True)
class StageReport:
    stage: str
    runs: list[Run]
    max_rss_mib: float | None


def _selected(size: int, only: Sequence[str] | None) -> dict[str, str]:
    every = inputs(size)
    return every if only is None else {label: every[label] for label in only}


def _child(stage_name: str, size: int, start: int) -> int:
    from pipelines.speech.text import TextError

    stage = _stages()[stage_name]
    only = os.environ.get("HOSTILE_TEXT_ONLY")
    chosen = _selected(size, json.loads(only) if only else None)
    for label, value in list(chosen.items())[start:]:
        print(json.dumps({"start": label}), flush=True)
        started = time.perf_counter()
        try:
            stage(value)
            outcome = "ok"
        except TextError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
        except Exception as exc:
            outcome = f"error: {type(exc).__name__}: {str(exc)[:200]}"
        seconds = time.perf_counter() - started
        print(json.dumps({"done": label, "s": seconds, "outcome": outcome}), flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mib": rss}), flush=True)
    return 0


def run_stage(
    stage: str, timeout: float = 30.0, size: int = SIZE, only: Sequence[str] | None = None
) -> StageReport:
    """All inputs (or those labelled `only`) through one stage in a child; an input still
    running after `timeout` seconds is recorded as killed and the next child goes on after it."""
    labels = list(_selected(size, only))
    runs: list[Run] = []
    rss: float | None = None
    while len(runs) < len(labels):
        more, child_rss = _run_child(stage, timeout, size, len(runs), only)
        rss = max(rss or 0.0, child_rss or 0.0) or None
        if not more:
            runs.append(Run(stage, labels[len(runs)], None, "child died at start-up"))
        runs += more
    return StageReport(stage, runs, rss)


def _run_child(
    stage: str, timeout: float, size: int, start: int, only: Sequence[str] | None
) -> tuple[list[Run], float | None]:
    env = dict(os.environ)
    if only is not None:
        env["HOSTILE_TEXT_ONLY"] = json.dumps(list(only))
    command = ["-m", "tests.support.hostile_text", "--child", stage, str(size), str(start)]
    proc = subprocess.Popen(
        [sys.executable, *command], stdout=subprocess.PIPE, cwd=ROOT, env=env, text=True
    )
    runs: list[Run] = []
    rss: float | None = None
    current: str | None = None
    try:
        for line in _lines(proc, timeout):
            if line is None:
                if current is not None:
                    runs.append(Run(stage, current, None, f"killed after {timeout:.0f} s"))
                break
            row = json.loads(line)
            if "start" in row:
                current = row["start"]
            elif "done" in row:
                runs.append(Run(stage, row["done"], row["s"], row["outcome"]))
                current = None
            elif "max_rss_mib" in row:
                rss = row["max_rss_mib"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if current is not None and (not runs or runs[-1].label != current):
        runs.append(Run(stage, current, None, f"child died (exit {proc.returncode})"))
    return runs, rss


def _lines(proc: subprocess.Popen[str], timeout: float) -> Iterator[str | None]:
    """The child's lines; None once `timeout` seconds pass without one."""
    assert proc.stdout is not None
    fd = proc.stdout
    while True:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            yield None
            return
        line = fd.readline()
        if not line:
            return
        yield line


def stage_names() -> list[str]:
    return [name for name in _stages() if not name.startswith("reference.")]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("STAGE", "SIZE", "START"))
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--json", help="also write every run to this file")
    parser.add_argument("stages", nargs="*")
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child[0], int(args.child[1]), int(args.child[2]))
    rows = []
    for stage in args.stages or stage_names():
        report = run_stage(stage, args.timeout)
        timed = [r for r in report.runs if r.seconds is not None]
        worst = max(timed, key=lambda r: r.seconds or 0.0, default=None)
        killed = [r for r in report.runs if r.seconds is None]
        errors = [r for r in report.runs if r.outcome.startswith("error")]
        line = f"{stage}: {len(timed)} inputs"
        if worst is not None:
            line += f", slowest {worst.seconds:.3f} s on {worst.label}"
        if report.max_rss_mib is not None:
            line += f", max RSS {report.max_rss_mib:.0f} MiB"
        if killed:
            line += f", KILLED at {args.timeout:.0f} s on {killed[0].label}"
        if errors:
            line += f", {len(errors)} errors e.g. {errors[0].label}: {errors[0].outcome}"
        print(line, flush=True)
        rows += [asdict(r) | {"max_rss_mib": report.max_rss_mib} for r in report.runs]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
