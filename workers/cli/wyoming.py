"""`mcp-media wyoming`: the Wyoming door (Home Assistant's voice pipeline), in the
foreground, on the cluster's gateway (or, with --inline, jobs in this process)."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from typing import TYPE_CHECKING

from workers.cli.common import CliError, connect_client
from workers.core.door_settings import WyomingSettings
from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.doors.listen import ListenError

if TYPE_CHECKING:
    from workers.doors.wyoming.server import Address

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
        "--zeroconf",
        nargs="?",
        const="mcp-media",
        metavar="NAME",
        help="announce the door over zeroconf as NAME._wyoming._tcp.local. (default name "
        "mcp-media; a tcp:// address other machines reach, so with --allow-remote)",
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
        for name in ("uri", "allow_remote", *_BOUNDS, "wait", "zeroconf")
        if getattr(args, name) is not None
    }
    for name in _BOUNDS:
        if given.get(name, 1) <= 0:
            raise CliError(f"--{name.replace('_', '-')} must be above 0")
    return settings.wyoming.model_copy(update=given)


def check_zeroconf(address: Address) -> None:
    """Zeroconf tells other machines where the door is: a loopback, unix or stdio address
    is of no use to them, and the `zeroconf` package must be there."""
    from workers.doors.wyoming.server import Scheme

    if address.scheme is not Scheme.TCP or not address.remote:
        raise CliError(
            "--zeroconf announces the door to other machines: it needs a tcp:// address they "
            f"reach (with --allow-remote), not {address}"
        )
    if importlib.util.find_spec("zeroconf") is None:
        raise CliError("--zeroconf needs the zeroconf package: pip install 'mcp-media[wyoming]'")


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
    if options.zeroconf:
        check_zeroconf(address)
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
    if options.zeroconf:
        sys.stderr.write(f"mcp-media: wyoming: announced over zeroconf as {options.zeroconf}\n")
    sys.stderr.flush()
    try:
        door = Door(gateway, limits, CatalogCache(gateway))
        asyncio.run(serve(door, address, options.zeroconf))
    finally:
        gateway.close()
    return 0
