"""`mcp-media wyoming`: the Wyoming door (Home Assistant's voice pipeline), in the
foreground, on the cluster's gateway (or, with --inline, jobs in this process)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from workers.cli.common import CliError, connect_client
from workers.core.door_settings import WyomingSettings
from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.doors.listen import ListenError

_BOUNDS = ("max_connections", "idle_timeout", "max_audio_seconds", "max_chunk_kb")


def add_wyoming_flags(p: argparse.ArgumentParser) -> None:
    """Each flag, when given, wins over its MCP_MEDIA_WYOMING__* setting."""
    p.add_argument(
        "--uri",
        help="where to listen: tcp://HOST:PORT, unix://PATH or stdio:// "
        "(default MCP_MEDIA_WYOMING__URI, tcp://127.0.0.1:10300)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        default=None,
        help="listen on an address other machines reach (Wyoming has no authentication)",
    )
    p.add_argument("--max-connections", type=int, help="open at once (default 16)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="close a connection silent this long (default 60)",
    )
    p.add_argument(
        "--max-audio-seconds",
        type=float,
        help="of one transcription's audio (default 120)",
    )
    p.add_argument(
        "--max-chunk-kb",
        type=int,
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


def wyoming_options(args: argparse.Namespace, settings: Settings) -> WyomingSettings:
    """The door's settings: MCP_MEDIA_WYOMING__* with each given flag laid over."""
    given = {
        name: getattr(args, name)
        for name in ("uri", "allow_remote", *_BOUNDS, "wait")
        if getattr(args, name) is not None
    }
    for name in _BOUNDS:
        if given.get(name, 1) <= 0:
            raise CliError(f"--{name.replace('_', '-')} must be above 0")
    return settings.wyoming.model_copy(update=given)


def cmd_wyoming(args: argparse.Namespace, settings: Settings) -> int:
    from workers.doors.wyoming.connection import Door
    from workers.doors.wyoming.describe import CatalogCache
    from workers.doors.wyoming.limits import Limits
    from workers.doors.wyoming.server import Address, check_address, serve

    options = wyoming_options(args, settings)
    try:
        address = Address.parse(options.uri)
        exposure = check_address(address, options.allow_remote)
    except ListenError as exc:
        raise CliError(str(exc)) from None
    limits = Limits(
        connections=options.max_connections,
        idle_seconds=options.idle_timeout,
        payload_bytes=options.max_chunk_kb * 1024,
        audio_seconds=options.max_audio_seconds,
        text_chars=settings.tts.max_chars,
        wait=options.wait or settings.api.wait,
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
