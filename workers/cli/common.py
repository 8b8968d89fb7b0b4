"""What the CLI commands share: input, JSON output, running jobs, rendering their results."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.ingest import ALL_CAPABILITIES
from pipelines.media import Capability, JobRequest
from pipelines.render import json_safe
from workers.core.capabilities import Lane
from workers.core.catalog import Catalog
from workers.core.outcomes import Failure
from workers.core.settings import Settings

if TYPE_CHECKING:
    from workers.files.shared_files import SharedFiles
    from workers.gateways.cluster import JobHandle, MediaClient

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


def read_input(source: str, hint: str = "") -> str:
    """The text of a file (or stdin: -); `hint` follows the error of one that is no text."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        return data.decode("utf-8-sig")  # a leading BOM is not an error
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read {source}: not UTF-8 text ({exc.reason}){hint}") from None
    except OSError as exc:
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
    enabled = ALL_CAPABILITIES
    if settings.vision.resolved_provider == "none":
        enabled -= {Capability.VISION_SUMMARIZE}
    if not settings.documents.enabled:
        enabled -= {Capability.DOCUMENT_DIGEST}
    return enabled


def job_rows(handles: Sequence[Any]) -> list[dict[str, Any]]:
    return [h.to_json() for h in handles]


def say(line: str) -> None:
    sys.stderr.write(f"mcp-media: {line}\n")


def check_shared_files(settings: Settings) -> SharedFiles:
    """What nodes share besides Redis: a missing bucket or refused credentials is one line
    now, not a failed job later. Returns the checked files, for the client to reuse."""
    from workers.files.shared_files import open_shared_files

    files = open_shared_files(settings)
    files.blobs.check()
    return files


def broker_for(settings: Settings) -> str:
    """The broker URL for a command, the shared files checked first."""
    check_shared_files(settings)
    return _broker(settings)


def _broker(settings: Settings) -> str:
    """The broker URL; says so once when this call started the embedded one (it keeps
    running after the command, for the next one: `mcp-media down` stops it)."""
    from workers.broker.embedded import checked_broker

    broker = checked_broker(settings)
    if broker.started:
        say(
            f"started the embedded broker on 127.0.0.1:{broker.port} (stop it with: mcp-media down)"
        )
    return broker.url


def broker_fault(exc: BaseException) -> Failure | None:
    """The broker fault behind `exc` (it does not answer, or refuses writes), as one line's
    worth; None for anything else."""
    from kombu.exceptions import OperationalError

    from pipelines.errors import causes
    from pipelines.outcomes import Outcome
    from workers.broker.replies import broker_outcome

    for found in causes(exc):
        outcome = broker_outcome(found)
        if outcome is None and isinstance(found, OperationalError):
            outcome = Outcome.BROKER_UNAVAILABLE
        if outcome is Outcome.BROKER_CANNOT_PERSIST:
            return Failure(
                outcome, f"the broker refuses writes (free space on its disk): {str(found)[:200]}"
            )
        if outcome is Outcome.BROKER_UNAVAILABLE:
            return Failure(
                outcome,
                f"the broker does not answer ({str(found)[:200]}): is it running? "
                "`mcp-media up` starts one; MCP_MEDIA_REDIS_URL names another",
            )
    return None


def connect_client(settings: Settings, *, bounded: bool = False) -> MediaClient:
    """The cluster's gateway (`bounded`: see `MediaClient.connect`)."""
    from workers.gateways.cluster import MediaClient

    files = check_shared_files(settings)  # checked once, and handed to the client
    return MediaClient.connect(settings, _broker(settings), files, bounded=bounded)


def run_jobs(
    args: argparse.Namespace,
    settings: Settings,
    jobs: Sequence[JobRequest],
    trace_id: str,
    params: Mapping[str, Any] | None = None,
) -> list[Any]:
    if not jobs:
        return []
    if getattr(args, "inline", False):
        from workers.gateways.inline import run_inline

        return run_inline(settings, jobs, trace_id, params=params)
    lane = Lane.BATCH if getattr(args, "batch", False) else Lane.LIVE
    client = connect_client(settings, bounded=True)
    try:
        handles = client.submit(jobs, trace_id=trace_id, params=params, lane=lane)
        if args.wait:
            return _wait_served(client, handles, args.wait)
        _say_unserved(client, handles)  # not waited for: still no "still running" for nobody
        return handles
    finally:
        client.close()


def served_catalog(args: argparse.Namespace, settings: Settings) -> Catalog:
    """What the workers serve (voices, models, languages), as they announce it; with
    `--inline`, what this process serves."""
    if getattr(args, "inline", False):
        from workers.gateways.inline import own_catalog

        return own_catalog(settings)
    client = connect_client(settings, bounded=True)
    try:
        return client.catalog()
    finally:
        client.close()


def _say_unserved(client: MediaClient, handles: list[JobHandle]) -> dict[str, list[JobHandle]]:
    """Say which queue of these jobs no live worker serves; those handles, by queue."""
    idle = client.unserved(handles)
    for queue in sorted(idle):
        say(
            f"no worker serves the {queue!r} queue; the job stays queued — "
            f"start one with: mcp-media worker --queues {queue}"
        )
    return idle


def _wait_served(client: MediaClient, handles: list[JobHandle], timeout: float) -> list[JobHandle]:
    """Wait for the jobs some live worker serves; say at once which queue has none."""
    idle = _say_unserved(client, handles)
    skipped = {id(h) for found in idle.values() for h in found}
    waited = iter(client.wait([h for h in handles if id(h) not in skipped], timeout))
    return [h if id(h) in skipped else next(waited) for h in handles]
