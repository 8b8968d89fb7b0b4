"""mcp-media command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipelines import ingest
from pipelines.errors import ConfigError, InvalidToolResult, MediaError
from pipelines.ingest import ALL_CAPABILITIES
from pipelines.media import Capability, JobRequest
from pipelines.render import RenderedResult, annotate, pending_line, wrap_untrusted
from pipelines.results import Envelope, Status
from workers.settings import Settings

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; exit code 2."""


def _read_input(source: str) -> str:
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        return data.decode("utf-8-sig")  # a leading BOM is not an error
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {source}: {exc}") from None


def _print_json(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value)  # lone surrogates: only their escaped form is valid UTF-8
    sys.stdout.write(text + "\n")


def enabled_capabilities(settings: Settings) -> frozenset[Capability]:
    if settings.vision.resolved_provider == "none":
        return ALL_CAPABILITIES - {Capability.VISION_SUMMARIZE}
    return ALL_CAPABILITIES


def result_note(envelope: Envelope) -> str | None:
    """What the agent sees for a finished job: only `done` results say anything."""
    if envelope.status is not Status.DONE:
        return None
    output = envelope.output
    body = output.get("summary") if "summary" in output else output.get("text")
    if not isinstance(body, str) or not body.strip():
        return None
    return wrap_untrusted(envelope.key.capability.value, body)


def _job_rows(handles: Sequence[Any]) -> list[dict[str, Any]]:
    return [h.to_json() for h in handles]


def _run_jobs(
    args: argparse.Namespace, settings: Settings, jobs: Sequence[JobRequest], trace_id: str
) -> list[Any]:
    if not jobs:
        return []
    if getattr(args, "inline", False):
        from workers.inline import run_inline

        return run_inline(settings, jobs, trace_id)
    from workers.client import MediaClient

    client = MediaClient.connect(settings)
    try:
        handles = client.submit(jobs, trace_id=trace_id)
        if args.wait:
            handles = client.wait(handles, args.wait)
        return handles
    finally:
        client.close()


def render_with_jobs(rendered: RenderedResult, handles: Sequence[Any]) -> str:
    notes: dict[str, list[str]] = {}
    for handle in handles:
        if handle.envelope is not None:
            note = result_note(handle.envelope)
            if note:
                notes.setdefault(handle.key.sha256, []).append(note)
        else:
            notes.setdefault(handle.key.sha256, []).append(
                pending_line(handle.key.capability.value, handle.id)
            )
    return annotate(rendered.text, rendered.media, notes)


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    text = _read_input(args.file)
    try:
        rendered = ingest(
            text,
            cache=settings.media_cache(),
            server=args.server,
            capabilities=enabled_capabilities(settings),
        )
    except InvalidToolResult as exc:
        raise CliError(str(exc)) from None
    trace_id = args.trace_id or uuid.uuid4().hex[:16]
    handles = _run_jobs(args, settings, rendered.jobs, trace_id)
    agent_text = render_with_jobs(rendered, handles) if handles else rendered.text
    if args.json:
        out: dict[str, Any] = dict(rendered.to_json())
        out["text"] = agent_text
        out["trace_id"] = trace_id
        if handles:
            out["jobs"] = _job_rows(handles)
        _print_json(out)
    else:
        sys.stdout.write(agent_text + "\n")
    return 0


def cmd_describe(args: argparse.Namespace, settings: Settings) -> int:
    from workers.single import store_file

    stored = store_file(settings, Path(args.image), "image")
    job = JobRequest(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
    handles = _run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    (handle,) = handles
    if args.json:
        _print_json(handle.to_json())
    elif handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
    else:
        note = result_note(handle.envelope)
        reason = handle.envelope.reason or "no summary"
        sys.stdout.write((note or f"[no summary: {reason}]") + "\n")
    return 0


def _transcript_json(handle: Any) -> dict[str, Any]:
    out = handle.envelope.output if handle.envelope is not None else {}
    return {
        "text": out.get("text"),
        "segments": [
            {"start": seg["start"], "end": seg["end"], "text": seg["text"]}
            for seg in out.get("segments", [])
        ],
        "language": out.get("language"),
        "duration_s": out.get("duration_s"),
        "status": handle.status.value,
        "id": handle.id,
        "reason": handle.envelope.reason if handle.envelope is not None else None,
    }


def cmd_transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.speech.stt import Segment, Transcript, format_transcript
    from workers.single import store_file

    stored = store_file(settings, Path(args.file), "audio")
    job = JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path)
    (handle,) = _run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    if args.json:
        _print_json(_transcript_json(handle))
        return 0
    if handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
        return 0
    if handle.envelope.status is not Status.DONE:
        sys.stderr.write(f"mcp-media: transcription {handle.status}: {handle.envelope.reason}\n")
        return 1
    out = handle.envelope.output
    transcript = Transcript(
        text=out["text"],
        segments=tuple(Segment(s["start"], s["end"], s["text"]) for s in out["segments"]),
        language=out["language"],
        duration_s=out["duration_s"],
        processing_s=out.get("processing_s", 0.0),
    )
    sys.stdout.write(format_transcript(transcript, args.format).rstrip("\n") + "\n")
    return 0


def cmd_speak(args: argparse.Namespace, settings: Settings) -> int:
    from workers.speech import store_request, synthesis_request

    text = sys.stdin.read() if args.text == "-" else args.text
    if args.voice:
        settings.tts.voice = args.voice
    if args.stream:
        from workers.streaming import speak_stream

        return speak_stream(settings, text, args)
    params = synthesis_request(text, settings, args.format, args.speed)
    request = store_request(settings, params)
    job = JobRequest(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
    if not args.inline and not args.wait:
        args.wait = 120.0  # speaking is the whole point of the command: wait by default
    (handle,) = _run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    out = handle.envelope.output if handle.envelope is not None else {}
    path = out.get("path")
    if path and args.out:
        import shutil

        shutil.copyfile(path, args.out)
        path = str(Path(args.out).resolve())
    media_tag = None
    if path:
        media_tag = ("[[audio_as_voice]]\n" if out.get("format") == "ogg" else "") + f"MEDIA:{path}"
    row = {
        "path": path,
        "format": out.get("format", params["format"]),
        "duration_s": out.get("duration_s"),
        "media_tag": media_tag,
        "status": handle.status.value,
    }
    if args.json:
        row["id"] = handle.id
        row["reason"] = handle.envelope.reason if handle.envelope is not None else None
        _print_json(row)
    elif media_tag:
        sys.stdout.write(f"{media_tag}\n")
        sys.stderr.write(f"mcp-media: {row['duration_s']} s of speech\n")
    elif handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
    else:
        sys.stderr.write(f"mcp-media: speech {handle.status}: {handle.envelope.reason}\n")
        return 1
    return 0


def cmd_result(args: argparse.Namespace, settings: Settings) -> int:
    from workers.client import MediaClient

    client = MediaClient.connect(settings)
    try:
        job_id, key, envelope = client.result(args.ident)
        status = envelope.status.value if envelope else None
        if envelope is None and key is not None:
            status = "running" if client.store.claimed(key) else "pending"
    finally:
        client.close()
    row = {
        "id": job_id,
        "capability": key.capability.value if key else None,
        "sha256": key.sha256 if key else None,
        "status": status or "unknown",
        "result": envelope.to_json() if envelope else None,
    }
    if args.json:
        _print_json(row)
    else:
        sys.stdout.write(f"{row['id']} {row['capability']} {row['status']}\n")
        if envelope is not None:
            note = result_note(envelope)
            sys.stdout.write((note or f"reason: {envelope.reason}") + "\n")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from workers.status import collect, format_status

    while True:
        report = collect(settings)
        if args.json:
            _print_json(report)
        else:
            if args.watch and sys.stdout.isatty():
                sys.stdout.write("\x1b[H\x1b[2J")
            sys.stdout.write(format_status(report))
        sys.stdout.flush()
        if not args.watch:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0


def cmd_reprocess(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime

    from pipelines.media import MediaKind
    from workers.client import MediaClient
    from workers.reprocess import AlreadyRunning, Selection, run

    kinds = {
        "image": (MediaKind.IMAGE,),
        "audio": (MediaKind.AUDIO,),
        "all": (MediaKind.IMAGE, MediaKind.AUDIO),
    }[args.kind]
    if settings.vision.resolved_provider == "none":
        kinds = tuple(k for k in kinds if k is not MediaKind.IMAGE)
    try:
        since = datetime.fromisoformat(args.since) if args.since else None
    except ValueError:
        raise CliError(f"--since {args.since!r} is not a date (YYYY-MM-DD[THH:MM])") from None
    selection = Selection(
        kinds=kinds,
        mode="all" if args.all else "missing",
        include_degraded=args.include_degraded,
        since=since,
        limit=args.limit,
    )
    client = MediaClient.connect(settings)
    try:
        tally = run(client, selection, high_water=settings.jobs.high_water, dry_run=args.dry_run)
    except AlreadyRunning as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()
    if args.json:
        _print_json(tally.summary() | ({"by_kind": tally.by_kind} if args.dry_run else {}))
    elif args.dry_run:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(tally.by_kind.items())) or "nothing"
        sys.stdout.write(f"would enqueue {tally.selected} ({shown}); {tally.skipped} up to date\n")
    else:
        sys.stdout.write(" ".join(f"{k}={v}" for k, v in tally.summary().items()) + "\n")
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.app import get_app
    from workers.supervisor import worker_argv

    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    from workers.capabilities import QUEUES

    unknown = set(queues) - set(QUEUES)
    if unknown or not queues:
        raise CliError(f"unknown queue(s) {sorted(unknown)}; choose from {', '.join(QUEUES)}")
    from workers.readiness import check_ready

    check_ready(settings, queues)
    os.environ["MCP_MEDIA_WORKER_QUEUES"] = ",".join(queues)
    app = get_app()
    app.worker_main(worker_argv(settings, queues, args.concurrency))
    return 0


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from workers.up import run_up

    return run_up(settings, grace=args.grace)


def _log_line(line: str) -> None:
    sys.stderr.write(line + "\n")


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    from workers import models

    if args.action == "prepare":
        infos = models.prepare(settings.home, args.names or None, log=_log_line)
    else:
        infos = models.list_models(settings.home)
    if args.json:
        _print_json([info.to_json() for info in infos])
    else:
        for info in infos:
            sys.stdout.write(
                f"{info.name:24} {info.kind.value:4} {info.size_bytes / 1e6:7.1f} MB  "
                f"{info.licence:12} {info.source}  {info.path}\n"
            )
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    return run_demo(settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-media", description="Media worker for AI agents (MCP media blocks)."
    )
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

    p = sub.add_parser("transcribe", help="speech to text for one audio file")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "json", "srt", "vtt"], default="text")
    _job_flags(p)
    p.set_defaults(handler=cmd_transcribe)

    p = sub.add_parser("speak", help="text to speech (Ogg/Opus voice note or WAV)")
    p.add_argument("text", metavar="TEXT|-")
    p.add_argument("--voice", help="voice model folder name under $MCP_MEDIA_HOME/models")
    p.add_argument("--format", choices=["ogg", "wav"])
    p.add_argument("--speed", type=float)
    p.add_argument(
        "--stream",
        action="store_true",
        help="synthesise here, writing audio as each sentence is ready",
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
    p.add_argument("--kind", choices=["image", "audio", "all"], default="all")
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
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_reprocess)

    p = sub.add_parser("worker", help="run one Celery worker for some queues")
    p.add_argument("--queues", default="vision,stt,tts")
    p.add_argument("--concurrency", type=int)
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("models", help="prepare or list the local speech models")
    p.add_argument("action", choices=["prepare", "list"])
    p.add_argument("names", nargs="*", help="model names (default: all)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_models)

    p = sub.add_parser("demo", help="the whole pipeline once on the bundled sample (make run)")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("up", help="broker + one worker per queue, in the foreground")
    p.add_argument("--grace", type=float, default=60.0, help="seconds to let jobs finish")
    p.set_defaults(handler=cmd_up)
    return parser


def _job_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for job results"
    )
    p.add_argument("--inline", action="store_true", help="run the jobs here, without a broker")
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
        settings = Settings()
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
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
