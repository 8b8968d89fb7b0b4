"""Zeroconf (mDNS) discovery: the door announced as `_wyoming._tcp.local.`, as Home
Assistant's own Wyoming servers are, so Home Assistant offers it without being told the
address. Only for a TCP address other machines reach (a loopback one is of no use to them).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

SERVICE = "_wyoming._tcp.local."
_MDNS_GROUP = ("224.0.0.251", 5353)


def announced_host(host: str) -> str:
    """The address to announce: the one bound, or for a wildcard bind the address this
    machine reaches the mDNS group from (no packet is sent)."""
    try:
        literal = ipaddress.ip_address(host) if host else None
    except ValueError:  # a name: the address it stands for
        return str(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
    if literal is not None and not literal.is_unspecified:
        return host
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(_MDNS_GROUP)
        return str(probe.getsockname()[0])
    finally:
        probe.close()


class Announcement:
    """One registered service; `close` withdraws it (a goodbye packet) and stops mDNS."""

    def __init__(self, zeroconf: AsyncZeroconf, info: AsyncServiceInfo) -> None:
        self.zeroconf = zeroconf
        self.info = info

    async def close(self) -> None:
        try:
            await self.zeroconf.async_unregister_service(self.info)
        finally:
            await self.zeroconf.async_close()


async def announce(name: str, host: str, port: int) -> Announcement:
    """`NAME._wyoming._tcp.local.` at the door's address and port, on every interface."""
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

    address = announced_host(host)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    info = AsyncServiceInfo(
        SERVICE,
        f"{name}.{SERVICE}",
        addresses=[socket.inet_pton(family, address)],
        port=port,
    )
    zeroconf = AsyncZeroconf()
    try:
        await zeroconf.async_register_service(info)
    except BaseException:
        await zeroconf.async_close()
        raise
    return Announcement(zeroconf, info)
