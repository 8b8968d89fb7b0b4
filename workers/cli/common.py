"""What the CLI commands share: input, JSON output, running jobs, rendering their results."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.ingest import ALL_CAPABILITIES
from pipelines.media import Capability, JobRequest
from pipelines.render import json_safe
from workers.settings import Settings

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; exit code 2."""


# Arguments that are text (not paths): checked to be valid UTF-8 before any command runs.
TEXT_ARGS = ("text", "server", "voice", "trace_id", "ident")


def check_text_args(args: argparse.Namespace) -> None:
    """Invalid UTF-8 in a text argument reaches Python as lone surrogates (surrogateescape);
    refuse it here, in one line, instead of failing on the first encode later."""
    for name in TEXT_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and not _is_utf8(value):
            flag = name.upper() if name in ("text", "ident") else "--" + name.replace("_", "-")
            raise CliError(f"{flag} is not valid UTF-8")


def _is_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_text(value: str) -> str:
    """A text argument, or standard input for `-`, decoded strictly as UTF-8."""
    if value != "-":
        return value  # checked by check_text_args
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"standard input is not valid UTF-8 (byte {exc.start})") from None


def read_input(source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        return data.decode("utf-8-sig")  # a leading BOM is not an error
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {source}: {exc}") from None


def print_json(value: Any) -> None:
    value = json_safe(value)  # NaN/Infinity -> null: never print a bare NaN
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, allow_nan=False)  # lone surrogates: escaped form is valid
    sys.stdout.write(text + "\n")


def enabled_capabilities(settings: Settings) -> frozenset[Capability]:
    if settings.vision.resolved_provider == "none":
        return ALL_CAPABILITIES - {Capability.VISION_SUMMARIZE}
    return ALL_CAPABILITIES


def job_rows(handles: Sequence[Any]) -> list[dict[str, Any]]:
    return [h.to_json() for h in handles]


def run_jobs(
    args: argparse.Namespace, settings: Settings, jobs: Sequence[JobRequest], trace_id: str
) -> list[Any]:
    if not jobs:
        return []
    if getattr(args, "inline", False):
        from workers.jobs.inline import run_inline

        return run_inline(settings, jobs, trace_id)
    from workers.client import MediaClient

    client = MediaClient.connect(settings)
    try:
        handles = client.submit(jobs, trace_id=trace_id)
        if args.wait:
            handles = client.wait(handles, args.wait)
        return handles
    finally:
        client.close()
