"""mcp-media's version, as installed (the MCP handshake's serverInfo, `--version`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def current() -> str:
    try:
        return version("mcp-media")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"
