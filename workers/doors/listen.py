"""What every network door checks before it listens: the address, the port, the secret.

Shared by the MCP door (`proxy --http`) and the HTTP API (`serve`): loopback by default, a
secret always, and a non-loopback address refused unless the secret was given explicitly.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
from pathlib import Path


class ListenError(Exception):
    """A door cannot start as asked; the message says why, in one line."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def machine_names() -> frozenset[str]:
    """The names of this machine a client may use off loopback (lower case)."""
    names = {"localhost", socket.gethostname().lower()}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
    return frozenset(name for name in names if name)


def split_host(value: str) -> tuple[str, str] | None:
    """A Host header as (host, port); None when it is not `host[:port]`."""
    if value.startswith("["):
        inside, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return inside, rest[1:]
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, ""
    return (host, port) if port.isdigit() and ":" not in host else None


def host_allowed(value: str, names: frozenset[str], *, addresses: bool) -> bool:
    """Does a Host header name this server (DNS-rebinding protection)? One of `names`, or,
    with `addresses`, any IP address literal (an address of this machine, or one a NAT or a
    published container port forwards from); any port. A name an attacker controls is
    neither."""
    parts = split_host(value.strip().lower())
    if parts is None or not parts[0]:
        return False
    host = parts[0].rstrip(".")
    if host in names:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return addresses


def check_free(host: str, port: int) -> None:
    """Refuse at start, in one line, an address another process already listens on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def resolve_secret(
    home: Path, given: str | None, host: str, *, file: str, how: str, noun: str = "key"
) -> str:
    """The secret given; else, on loopback only, the one kept 0600 in `home/file` (made once).

    `how` names the way to give one (a flag or a variable) and `noun` what it is called, for
    the refusal messages.
    """
    if given:
        if "${" in given or given.startswith("$"):
            # podman-compose 1.0.3 passes `${MCP_MEDIA_API__KEY:-}` through literally.
            raise ListenError(
                f"the {noun} given with {how} is an unexpanded variable ({given[:40]!r}): "
                "set it to the secret itself"
            )
        if len(given) < 16:
            raise ListenError(f"the {noun} given with {how} must be at least 16 characters")
        return given
    if not is_loopback(host):
        raise ListenError(
            f"refusing to listen on {host} without a {noun}: set {how} (or listen on 127.0.0.1)"
        )
    path = home / file
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True)
    made = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another door made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        out.write(made)
    return made
