"""`mcp-media proxy` over stdio starts its upstreams before it imports the MCP SDK, so that a
Python upstream's own start (which imports the SDK too) overlaps ours: what the command line
and the launch path load before the upstreams start holds no module of the SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration

BEFORE_UPSTREAMS = """
import sys
from workers.cli.main import build_parser
from workers.cli.mcp import door_options
from workers.doors.mcp.launch import serve_stdio_started
from workers.doors.mcp.upstream_specs import read_config
args = build_parser().parse_args(["proxy", "--", "x"])
door_options(args)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")))
"""


def test_nothing_before_the_upstreams_start_imports_the_mcp_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_UPSTREAMS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout
