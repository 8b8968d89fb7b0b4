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
from workers.settings import Settings

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; exit code 2."""


def read_input(source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        return data.decode("utf-8-sig")  # a leading BOM is not an error
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {source}: {exc}") from None


def print_json(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value)  # lone surrogates: only their escaped form is valid UTF-8
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
