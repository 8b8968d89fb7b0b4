"""Starting a door that fails open: a setting it cannot use never stops `mcp-media proxy` or
`mcp-media mcp`.

An agent drops an MCP server that exits at start, and with it every tool of the server
behind the proxy. So the door starts whatever the settings say: a value that does not parse
is dropped (its default is used), a vision endpoint without a model summarises here instead,
a broker that refuses our certificates or credentials gives way to jobs in this process, and
a broker that does not answer leaves each result forwarded with a note naming it. Each is
one WARNING line on stderr naming the setting and what the door does instead.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

from pydantic import ValidationError

from pipelines.errors import ConfigError
from workers.core.gateway import JobGateway
from workers.core.settings import Settings
from workers.core.stage_configs import tts_model, vision_config
from workers.doors.mcp.outcomes import door_failure, failure_line
from workers.gateways.connect import open_gateway

log = logging.getLogger("mcp_media.door")

_PREFIX = "MCP_MEDIA_"
_MAX_DROPPED = 32  # settings dropped before giving up (each round drops at least one)


def _names(loc: tuple[int | str, ...], env: Mapping[str, str]) -> list[str]:
    """The variables of `env` behind a validation error at `loc`: the one it names (e.g.
    MCP_MEDIA_VISION__TIMEOUT), else the group it is in (a JSON MCP_MEDIA_VISION too)."""
    parts = [str(part) for part in loc]
    exact = (_PREFIX + "__".join(parts)).upper()
    found = [key for key in env if key.upper() == exact]
    if found or not parts:
        return found
    group = (_PREFIX + parts[0]).upper()
    return [key for key in env if key.upper() == group or key.upper().startswith(group + "__")]


def forgiving_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings of the environment, less each variable that does not validate (its
    default is used instead, with a WARNING naming it)."""
    given = dict(os.environ if env is None else env)
    for _ in range(_MAX_DROPPED):
        try:
            return Settings.from_env(given)
        except ValidationError as exc:
            first = exc.errors()[0]
            names = _names(tuple(first["loc"]), given)
            if not names:
                raise  # not from a variable we can drop: the usual error line
            for name in names:  # its value is not logged: it may hold a secret
                del given[name]
                log.warning("%s is not used (%s): its default is used instead", name, first["msg"])
    return Settings.from_env(given)


def usable_settings(settings: Settings) -> Settings:
    """`settings`, with what cannot work at all replaced by what can (and a WARNING)."""
    try:
        vision_config(settings)
    except ConfigError as exc:
        log.warning(
            "MCP_MEDIA_VISION__BASE_URL: %s; images are summarised here instead (their "
            "facts and OCR)",
            exc,
        )
        vision = settings.vision.model_copy(update={"provider": "local"})
        settings = settings.model_copy(update={"vision": vision})
    return settings


def door_gateway(settings: Settings, *, inline: bool) -> JobGateway:
    """The job gateway the door holds: the cluster's, or this process's when the broker's
    settings cannot be used (certificates, credentials, a malformed URL)."""
    try:
        gateway = open_gateway(settings, inline=inline)
    except Exception as exc:  # any broker setting: still serve the upstream's tools
        log.warning(
            "the broker (MCP_MEDIA_REDIS_URL and MCP_MEDIA_REDIS_*) cannot be used: %s; "
            "jobs run in this process instead",
            " ".join(str(exc).split()) or type(exc).__name__,
        )
        return open_gateway(settings, inline=True)
    if not gateway.runs_here:
        # Off the start path: the first answers do not wait for the broker.
        threading.Thread(target=_warn_if_silent, args=(gateway,), daemon=True).start()
    return gateway


def _warn_if_silent(gateway: JobGateway) -> None:
    """One WARNING when the broker does not answer now; results say so until it does."""
    try:
        gateway.waiting()
    except Exception as exc:
        log.warning(
            "the broker (MCP_MEDIA_REDIS_URL) does not answer: %s; each result is forwarded "
            "as the tool returned it, with a note, until it answers",
            failure_line(door_failure(exc, gateway)),
        )


def unservable_tools(settings: Settings, *, inline: bool) -> frozenset[str]:
    """The own speech tools nothing can serve: their model is not prepared and jobs run
    here (no broker known). Not offered, so the model does not call them to fail; one
    WARNING each says which model is missing and how to get it."""
    tts, _ = tts_model(settings)
    missing = [
        (tool, what, folder)
        for tool, what, folder in (
            (
                "transcribe_audio",
                "speech-to-text",
                settings.stt.model_dir or settings.models_root / settings.stt.model,
            ),
            ("speak", "text-to-speech", tts),
        )
        if not folder.is_dir()
    ]
    if not missing or (not inline and _broker_known(settings)):
        return frozenset()  # served here, or by workers elsewhere
    for tool, what, folder in missing:
        log.warning(
            "no %s model at %s: %s is not offered; prepare it with `make models` or "
            "`mcp-media models prepare`",
            what,
            folder,
            tool,
        )
    return frozenset(tool for tool, _, _ in missing)


def _broker_known(settings: Settings) -> bool:
    if settings.redis_url:
        return True
    if not (settings.home / "redis").is_dir():
        return False  # no embedded broker here: its module (and Redis's) stays unloaded
    from workers.broker.embedded import running_embedded

    return running_embedded(settings.home) is not None
