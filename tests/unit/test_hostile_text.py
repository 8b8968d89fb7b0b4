"""Every text stage finishes on adversarial 20,000-character input; the CLI refuses bad text
in one line.

Each stage runs in a child process over every input of `tests/support/hostile_text.py`
(repetitions of each character class the rules match on, pairs of them, nested markdown,
digit runs); an input still running after `HARD_TIMEOUT` seconds is the failure. There is
no timed assertion: the timeout is a deadline for a hang (the cubic rules this replaced ran
for minutes), and speed figures are measured by `python -m tests.support.hostile_text
--report` for SECURITY.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hostile_text import SIZE, inputs, run_stage, stage_names

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HARD_TIMEOUT = 30.0


def test_the_inputs_are_adversarial_and_full_size() -> None:
    made = inputs()
    assert len(made) > 700
    assert max(len(text) for text in made.values()) == SIZE
    assert sum(len(text) == SIZE for text in made.values()) > 750
    assert made["'# a'+' '*n+'b'"] == "# a" + " " * (SIZE - 4) + "b"
    assert made["'\\n'*n+'x'"] == "\n" * (SIZE - 1) + "x"


@pytest.mark.integration  # starts a process
@pytest.mark.parametrize("stage", stage_names())
def test_every_text_stage_finishes_on_every_adversarial_input(stage: str) -> None:
    report = run_stage(stage, timeout=HARD_TIMEOUT)
    hung = [r.label for r in report.runs if r.seconds is None]
    failed = [f"{r.label}: {r.outcome}" for r in report.runs if r.outcome.startswith("error")]
    assert hung == [], f"{stage} still running after {HARD_TIMEOUT:.0f} s on {hung[:5]}"
    assert failed == [], f"{stage} raised: {failed[:5]}"
    assert len(report.runs) == len(inputs())


@pytest.mark.integration  # starts a process
def test_the_runner_catches_a_catastrophic_rule() -> None:
    """The heading rule before issue 14 (cubic on `# a` + spaces + `b`) is caught."""
    label = "'# a'+' '*n+'b'"
    report = run_stage("reference.cubic_heading", timeout=2.0, only=[label, "prose"])
    assert [(r.label, r.seconds is None) for r in report.runs] == [(label, True), ("prose", False)]


def cli(args: list[str | bytes], home: Path, stdin: bytes | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env.update(MCP_MEDIA_HOME=str(home), MCP_MEDIA_REDIS_URL="redis://127.0.0.1:1/0")
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"workers.cli.main", *(os.fsencode(a) for a in args)],
        input=stdin or b"",
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.stdout == b""
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        ([b"speak", b"caf\xe9 au lait", b"--inline"], None, 2, "TEXT is not valid UTF-8"),
        (["speak", "-", "--inline"], b"caf\xe9", 2, "standard input is not valid UTF-8 (byte 3)"),
        (["speak", "-", "--inline"], b"\xff\xfe\x00", 2, "standard input is not valid UTF-8"),
        ([b"ingest", b"-", b"--server", b"\xff"], b"{}", 2, "--server is not valid UTF-8"),
        ([b"speak", b"hi", b"--trace-id", b"\xc3"], None, 2, "--trace-id is not valid UTF-8"),
        (["speak", "9" * 5000, "--inline"], None, 1, "once numbers and symbols are spelled out"),
        (["speak", "-", "--inline"], b"$" + b"9" * 4400, 1, "over the 20000 character limit"),
        (["speak", "-", "--inline"], "👍 ** ---".encode(), 1, "nothing to speak"),
    ],
)
@pytest.mark.integration  # starts a process
def test_the_cli_refuses_bad_text_in_one_line(
    args: list[str | bytes], stdin: bytes | None, code: int, message: str, tmp_path: Path
) -> None:
    returncode, stderr = cli(args, tmp_path / "home", stdin)
    assert "Traceback" not in stderr, stderr[-2000:]
    assert (returncode, stderr.count("\n")) == (code, 1), stderr
    assert stderr.startswith("mcp-media: error: ") and message in stderr, stderr
