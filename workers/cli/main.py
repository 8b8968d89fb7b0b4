"""mcp-media command line: the parser and the entry point; commands live in cli_media and
cli_admin."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from pipelines.errors import ConfigError, MediaError
from workers import version
from workers.cli.admin import (
    cmd_demo,
    cmd_down,
    cmd_models,
    cmd_reprocess,
    cmd_status,
    cmd_up,
    cmd_worker,
)
from workers.cli.common import EXIT_USAGE, CliError, broker_fault, check_text_args
from workers.cli.doctor import add_doctor_flags, cmd_doctor
from workers.cli.door_start import forgiving_settings
from workers.cli.mcp import add_door_flags, add_server_flags, cmd_intercept, cmd_mcp, cmd_proxy
from workers.cli.media import (
    cmd_describe,
    cmd_digest,
    cmd_ingest,
    cmd_result,
    cmd_speak,
    cmd_transcribe,
)
from workers.cli.outcomes import exit_status
from workers.cli.serve import add_inline_flag, add_serve_flags, cmd_serve
from workers.cli.wyoming import add_wyoming_flags, cmd_wyoming
from workers.core.confinement import confine_process
from workers.core.settings import Settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-media", description="Media worker for AI agents (MCP media blocks)."
    )
    parser.add_argument("--version", action="version", version=f"mcp-media {version.current()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="cache the media of one MCP CallToolResult, enqueue jobs")
    p.add_argument("file", nargs="?", default="-", help="JSON file, or - for stdin")
    p.add_argument("--server", help="MCP server name, for read_resource hints")
    _job_flags(p)
    p.set_defaults(handler=cmd_ingest)

    p = sub.add_parser("describe", help="summarise one image file")
    p.add_argument("image")
    _job_flags(p)
    p.set_defaults(handler=cmd_describe)

    read = "read one document file (PDF, DOCX, PPTX, XLSX, HTML, text) into Markdown"
    p = sub.add_parser(
        "digest",
        help=read,
        description=f"{read[0].upper()}{read[1:]}: its title, pages and first text, and the"
        " Markdown saved beside its cached copy. The digest line counts characters of that"
        " Markdown: an agent reads on from the offset it names with read_document.",
    )
    p.add_argument("file", help="the document file")
    _job_flags(p)
    p.set_defaults(handler=cmd_digest)

    p = sub.add_parser("transcribe", help="speech to text for one audio file")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "json", "srt", "vtt"], default="text")
    p.add_argument(
        "--language",
        help="the spoken language (en, zh, ...); default: detected by a multilingual model."
        " Mandarin is written in Simplified (MCP_MEDIA_STT__CHINESE_SCRIPT); zh-Hant, zh-TW"
        " or zh-HK ask for Traditional, zh-Hans or zh-CN for Simplified",
    )
    p.add_argument(
        "--words",
        action="store_true",
        help="time each word: `words` in --format json and --json, one cue per word in srt/vtt",
    )
    _job_flags(p)
    p.set_defaults(handler=cmd_transcribe)

    p = sub.add_parser("speak", help="text to speech (Ogg/Opus voice note or WAV)")
    p.add_argument("text", metavar="TEXT|-")
    p.add_argument(
        "--voice",
        help="a voice (af_heart, zf_xiaobei, ... see `mcp-media models list`), a voice"
        " model folder under $MCP_MEDIA_HOME/models, an OpenAI voice name (alloy, ...) or a"
        " Kokoro blend (af_bella(2)+af_sky(1))",
    )
    p.add_argument("--format", choices=["ogg", "wav"])
    p.add_argument("--speed", type=float)
    p.add_argument(
        "--stream",
        action="store_true",
        help="write Ogg/Opus as each sentence is ready (a cached job on the workers;"
        " with --inline, synthesised in this process)",
    )
    p.add_argument("--out", help="also copy the audio to this path (with --stream: write it)")
    _job_flags(p)
    p.set_defaults(handler=cmd_speak)

    p = sub.add_parser("result", help="a job result by job id or sha256")
    p.add_argument("ident", metavar="ID|SHA256")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_result)

    p = sub.add_parser("status", help="queues, results, workers, dead letters")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0)
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("reprocess", help="enqueue cached media again (new model, prompt, misses)")
    p.add_argument("--kind", choices=["image", "audio", "document", "all"], default="all")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--missing",
        action="store_true",
        default=True,
        help="media without a done result for the current version (default)",
    )
    mode.add_argument("--all", action="store_true", help="everything, forced")
    p.add_argument(
        "--include-degraded",
        action="store_true",
        help="with --missing: also retry degraded and failed results",
    )
    p.add_argument("--since", help="only media cached since this date (YYYY-MM-DD)")
    p.add_argument("--limit", type=int)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument(
        "--restart",
        action="store_true",
        help="start over: ignore where a run of the same selection stopped (default: resume)",
    )
    p.add_argument(
        "--backfill-index",
        action="store_true",
        help="index the store's blobs and results again (blobs stored by nodes without one)",
    )
    p.add_argument(
        "--json", action="store_true", help="the summary as JSON; progress as JSON lines"
    )
    p.set_defaults(handler=cmd_reprocess)

    p = sub.add_parser("worker", help="run one Celery worker for some queues")
    p.add_argument("--queues", default="vision,stt,tts")
    p.add_argument("--concurrency", type=int)
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("models", help="prepare or list the local speech models")
    p.add_argument("action", choices=["prepare", "list"])
    p.add_argument("names", nargs="*", help="model names (default: the default tier)")
    p.add_argument(
        "--tier",
        choices=["default", "quality"],
        action="append",
        help="prepare a tier (repeatable): default (whisper tiny.en, piper joe) or quality"
        " (multilingual whisper base, Kokoro v1.0 with English and Chinese voices)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_models)

    p = sub.add_parser(
        "proxy",
        help="an MCP server in front of other MCP servers that makes their media usable",
        description="mcp-media proxy [OPTIONS] -- CMD ARGS...  |  mcp-media proxy --config FILE",
    )
    add_server_flags(p)
    p.add_argument("--config", help="an mcpServers JSON file: several upstreams behind one server")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS... of the stdio server")
    p.set_defaults(handler=cmd_proxy)

    p = sub.add_parser("mcp", help="mcp-media's own MCP tools as a stdio server")
    add_server_flags(p)
    p.set_defaults(handler=cmd_mcp)

    p = sub.add_parser(
        "intercept",
        help="rewrite one CallToolResult from stdin to stdout (MCP gateway after:exec hook)",
    )
    add_door_flags(p, serves_links=False)
    p.set_defaults(handler=cmd_intercept)

    p = sub.add_parser("serve", help="the HTTP API (OpenAI-compatible audio) and the jobs page")
    add_serve_flags(p)
    add_inline_flag(p)
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser(
        "wyoming", help="the Wyoming server (Home Assistant's speech to text and TTS)"
    )
    add_wyoming_flags(p)
    p.set_defaults(handler=cmd_wyoming)

    p = sub.add_parser("demo", help="the whole pipeline once on the bundled sample (make run)")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("down", help="stop the embedded broker of MCP_MEDIA_HOME")
    p.set_defaults(handler=cmd_down)

    p = sub.add_parser("up", help="broker + one worker per queue, in the foreground")
    p.add_argument("--grace", type=float, default=60.0, help="seconds to let jobs finish")
    p.add_argument(
        "--api", action="store_true", help="also `mcp-media serve` (MCP_MEDIA_API__HOST/PORT)"
    )
    p.set_defaults(handler=cmd_up)

    p = sub.add_parser(
        "doctor",
        help="what works in this set-up and what to change (models, broker, store, vision,"
        " an upstream, the agent's timeouts)",
        description="mcp-media doctor [--timeout S] [-- CMD ARGS...]",
    )
    add_doctor_flags(p)
    p.set_defaults(handler=cmd_doctor, load_settings=forgiving_settings)
    return parser


def _job_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="wait this long for job results (default: 0, speak: 120)",
    )
    p.add_argument("--inline", action="store_true", help="run the jobs here, without a broker")
    p.add_argument(
        "--batch",
        action="store_true",
        help="queue the jobs in the batch lane: workers take live work first",
    )
    p.add_argument("--trace-id", help="carry this trace id through every job and log line")
    p.add_argument("--json", action="store_true", help="print the JSON form")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("MCP_MEDIA_LOG_LEVEL", "WARNING"),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        check_text_args(args)
        settings = getattr(args, "load_settings", Settings)()
        confine_process(settings.home)
        code: int = args.handler(args, settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        sys.stderr.write(f"mcp-media: error: bad setting {where}: {first['msg']}\n")
        return EXIT_USAGE
    except (CliError, ConfigError) as exc:
        sys.stderr.write(f"mcp-media: error: {exc}\n")
        return EXIT_USAGE
    except MediaError as exc:
        sys.stderr.write(f"mcp-media: error: {exc}\n")
        return exit_status(exc.outcome)
    except Exception as exc:
        fault = broker_fault(exc)
        if fault is None:
            raise
        sys.stderr.write(f"mcp-media: error: {fault.message}\n")
        return exit_status(fault.outcome)
    return code


if __name__ == "__main__":
    sys.exit(main())
