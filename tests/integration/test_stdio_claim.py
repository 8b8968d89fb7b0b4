"""The stdio door's claim of stdout, in a real process whose stdout is a pipe: while serving,
stray output goes to stderr and the wire carries only what the writer sends; after, fd 1 is
the wire again and blocking. Stderr on the very same pipe keeps the SDK's own claim."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration

CHILD = """
import os, anyio
from workers.doors.mcp.stdio_pipes import PipeWriter, claimed_stdout

async def main() -> None:
    with claimed_stdout() as wire:
        os.write(1, b"stray\\n")
        if wire is None:
            os.write(2, b"claim: sdk\\n")
            return
        await PipeWriter(wire).write('{"jsonrpc":"2.0","id":1,"result":{}}\\n')
    os.write(1, b"after: blocking=%d\\n" % os.get_blocking(1))

anyio.run(main)
"""


def _run(stderr: int) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=True,
    )


def test_stray_output_misses_the_wire_and_the_wire_comes_back() -> None:
    proc = _run(subprocess.PIPE)
    assert proc.stdout == b'{"jsonrpc":"2.0","id":1,"result":{}}\nafter: blocking=1\n'
    assert proc.stderr == b"stray\n"


def test_stderr_on_the_same_pipe_is_left_to_the_sdk() -> None:
    proc = _run(subprocess.STDOUT)
    assert proc.stdout == b"stray\nclaim: sdk\n"
