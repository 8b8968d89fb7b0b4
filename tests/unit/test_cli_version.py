"""`mcp-media --version` names the installed version, the one the MCP handshake gives."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from workers.cli.main import build_parser

pytestmark = pytest.mark.unit


def test_version_is_the_installed_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"mcp-media {version('mcp-media')}"
    assert version("mcp-media")  # never empty, as an SDK's serverInfo.version was
