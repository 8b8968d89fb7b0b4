"""Which MCP servers the proxy fronts: one command (`-- CMD ARGS...`) or an `mcpServers`
file, as specs. Light on purpose (no MCP SDK): the CLI reads them, and starts the stdio
servers, before it imports the rest of the door.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HTTP = ("http://", "https://")  # an upstream by URL


class ConfigFileError(Exception):
    """The mcpServers file cannot be used; the message says where."""


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: str = "streamable-http"  # or "sse", for `url`
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()


def parse_config(text: str, origin: str = "config") -> list[UpstreamSpec]:
    """The `mcpServers` JSON of desktop MCP clients: stdio `command`/`args`/`env`, or remote
    `url` with `type` (streamable-http, http or sse) and `headers`."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigFileError(f"{origin} is not JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping) or not servers:
        raise ConfigFileError(f"{origin}: expected an object with a non-empty `mcpServers`")
    specs = []
    for name, entry in servers.items():
        where = f"{origin}: mcpServers.{name}"
        if not isinstance(entry, Mapping):
            raise ConfigFileError(f"{where} must be an object")
        if not name or "__" in name:
            raise ConfigFileError(f"{where}: a server name must be non-empty, without `__`")
        if entry.get("disabled") is True:
            continue
        specs.append(_spec(name, entry, where))
    if not specs:
        raise ConfigFileError(f"{origin}: every server is disabled")
    return specs


def _strings(value: Any, where: str, kind: type) -> Any:
    if value is None:
        return kind()
    if kind is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if (
        kind is dict
        and isinstance(value, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    ):
        return dict(value)
    raise ConfigFileError(
        f"{where} must be a list of strings"
        if kind is list
        else f"{where} must map strings to strings"
    )


def _spec(name: str, entry: Mapping[str, Any], where: str) -> UpstreamSpec:
    command, url = entry.get("command"), entry.get("url")
    if isinstance(command, str) and command:
        return UpstreamSpec(
            name=name,
            command=command,
            args=tuple(_strings(entry.get("args"), f"{where}.args", list)),
            env=_strings(entry.get("env"), f"{where}.env", dict),
            cwd=entry.get("cwd") if isinstance(entry.get("cwd"), str) else None,
        )
    if isinstance(url, str) and url.startswith(_HTTP):
        kind = entry.get("type") or entry.get("transport") or "streamable-http"
        if kind == "http":
            kind = "streamable-http"
        if kind not in ("streamable-http", "sse"):
            raise ConfigFileError(f"{where}.type {kind!r}: use streamable-http or sse")
        return UpstreamSpec(
            name=name,
            url=url,
            transport=kind,
            headers=_strings(entry.get("headers"), f"{where}.headers", dict),
        )
    raise ConfigFileError(f"{where} needs a `command` (stdio) or an http(s) `url`")


def read_config(path: Path) -> list[UpstreamSpec]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read {path}: {exc}") from None
    return parse_config(text, str(path))
