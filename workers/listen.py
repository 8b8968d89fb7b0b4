"""What every network door checks before it listens: the address, the port, the secret.

Shared by the MCP door (`proxy --http`) and the HTTP API (`serve`): loopback by default, a
secret always, and a non-loopback address refused unless the secret was given explicitly.
"""

from __future__ import annotations

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
