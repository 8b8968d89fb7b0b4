"""`mcp-media serve`: the HTTP API and the jobs page, in the foreground."""

from __future__ import annotations

import argparse
import sys

from workers.cli.common import CliError, connect_client
from workers.core.settings import Settings
from workers.core.speech_scoring import SpeechScoring
from workers.doors.listen import ListenError, check_free, resolve_secret

KEY_FILE = "api-key"


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="address to listen on (default 127.0.0.1; MCP_MEDIA_API__HOST)")
    p.add_argument("--port", type=int, help="port (default 8000; MCP_MEDIA_API__PORT)")


def add_inline_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--inline",
        action="store_true",
        help="run the jobs in this process, without a broker or workers (no jobs page)",
    )


def speech_scoring(settings: Settings) -> SpeechScoring | None:
    """The VAD model Realtime sessions' server VAD runs, loaded once; None (and turns end on
    the client's commit) when none is prepared or it cannot be loaded."""
    from pipelines.errors import ConfigError
    from pipelines.speech.vad import validate_vad_model
    from workers.core.stage_configs import VAD_DEFAULT

    path = settings.stt.vad_model or settings.models_root / VAD_DEFAULT
    if not path.exists():
        return None
    try:
        from pipelines.engines.silero_stream import SileroScoring

        return SileroScoring(validate_vad_model(path))
    except (ConfigError, ImportError) as exc:
        sys.stderr.write(f"mcp-media: no server VAD on /v1/realtime: {exc}\n")
        return None


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.api.host
    port = args.port or settings.api.port
    given = settings.api.key.get_secret_value() or None
    try:
        key = resolve_secret(settings.home, given, host, file=KEY_FILE, how="MCP_MEDIA_API__KEY")
        check_free(host, port)
    except ListenError as exc:
        raise CliError(str(exc)) from None

    import uvicorn

    from workers.doors.api.app import create_app, http_protocol

    where = "MCP_MEDIA_API__KEY" if given else str(settings.home / KEY_FILE)
    shown = f"[{host}]" if ":" in host else host
    how = "jobs run in this process, no jobs page" if args.inline else "jobs run on the workers"
    sys.stderr.write(
        f"mcp-media: serving http://{shown}:{port}/ (OpenAI audio API at /v1, {how}; "
        f"key: {where})\n"
    )
    if args.inline:
        from workers.gateways.inline import InlineGateway

        # /metrics shows this process's own state: the jobs it admitted and runs (no workers)
        inline = InlineGateway(settings)
        scoring = speech_scoring(settings)
        app = create_app(settings, key, inline, host, inline.resources.state.view, scoring=scoring)
    else:
        from workers.gateways.operations import ClusterOperations

        client = connect_client(settings, bounded=True)
        steering = ClusterOperations(client)
        scoring = speech_scoring(settings)
        app = create_app(settings, key, client, host, client.state.view, steering, scoring)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=http_protocol(settings),  # the request head bounded; refusals in the OpenAI shape
        timeout_graceful_shutdown=5,  # open event streams (the jobs page) end on stop
        proxy_headers=bool(settings.api.trusted_proxies),  # uvicorn trusts loopback by default
        forwarded_allow_ips=settings.api.trusted_proxies or None,
    )
    return 0
