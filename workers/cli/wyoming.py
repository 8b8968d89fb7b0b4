"""`mcp-media wyoming`: the Wyoming door (Home Assistant's voice pipeline), in the
foreground, on the cluster's gateway (or, with --inline, jobs in this process)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from workers.cli.common import CliError, connect_client
from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.doors.listen import ListenError

DEFAULT_URI = "tcp://127.0.0.1:10300"


def add_wyoming_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--uri",
        default=DEFAULT_URI,
        help=f"where to listen: tcp://HOST:PORT, unix://PATH or stdio:// (default {DEFAULT_URI})",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on an address other machines reach (Wyoming has no authentication)",
    )
    p.add_argument("--max-connections", type=int, default=16, help="open at once (default 16)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="close a connection silent this long (default 60)",
    )
    p.add_argument(
        "--max-audio-seconds",
        type=float,
        default=120.0,
        help="of one transcription's audio (default 120)",
    )
    p.add_argument(
        "--max-chunk-kb",
        type=int,
        default=1024,
        help="of one event's payload, an audio chunk (default 1024)",
    )
    p.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="how long a request waits for its job (default MCP_MEDIA_API__WAIT)",
    )
    p.add_argument(
        "--inline",
        action="store_true",
        help="run the jobs in this process, without a broker or workers",
    )


def cmd_wyoming(args: argparse.Namespace, settings: Settings) -> int:
    from workers.doors.wyoming.connection import Door
    from workers.doors.wyoming.describe import CatalogCache
    from workers.doors.wyoming.limits import Limits
    from workers.doors.wyoming.server import Address, check_address, serve

    for name in ("max_connections", "idle_timeout", "max_audio_seconds", "max_chunk_kb"):
        if getattr(args, name) <= 0:
            raise CliError(f"--{name.replace('_', '-')} must be above 0")
    try:
        address = Address.parse(args.uri)
        exposure = check_address(address, args.allow_remote)
    except ListenError as exc:
        raise CliError(str(exc)) from None
    limits = Limits(
        connections=args.max_connections,
        idle_seconds=args.idle_timeout,
        payload_bytes=args.max_chunk_kb * 1024,
        audio_seconds=args.max_audio_seconds,
        text_chars=settings.tts.max_chars,
        wait=args.wait or settings.api.wait,
    )
    gateway: JobGateway
    if args.inline:
        from workers.gateways.inline import InlineGateway

        gateway = InlineGateway(settings)
    else:
        gateway = connect_client(settings, bounded=True)
    how = "jobs run in this process" if args.inline else "jobs run on the workers"
    sys.stderr.write(f"mcp-media: wyoming: {exposure} ({how})\n")
    sys.stderr.flush()
    try:
        asyncio.run(serve(Door(gateway, limits, CatalogCache(gateway)), address))
    finally:
        gateway.close()
    return 0
