"""mcp-media command line: ingest, and the job commands built on it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from pipelines import ingest
from pipelines.errors import InvalidToolResult
from workers.settings import Settings

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; exit code 2."""


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {source}: {exc}") from None


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    text = _read_input(args.file)
    try:
        rendered = ingest(text, cache=settings.media_cache(), server=args.server)
    except InvalidToolResult as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _print_json(rendered.to_json())
    else:
        sys.stdout.write(rendered.text + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-media", description="Media worker for AI agents (MCP media blocks)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_ingest = sub.add_parser("ingest", help="cache the media of one MCP CallToolResult")
    p_ingest.add_argument("file", nargs="?", default="-", help="JSON file, or - for stdin")
    p_ingest.add_argument("--server", help="MCP server name, for read_resource hints")
    p_ingest.add_argument("--json", action="store_true", help="print the JSON form")
    p_ingest.set_defaults(handler=cmd_ingest)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings()
        code: int = args.handler(args, settings)
    except CliError as exc:
        sys.stderr.write(f"mcp-media: error: {exc}\n")
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
