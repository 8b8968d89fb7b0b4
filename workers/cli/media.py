"""CLI commands that work on media: ingest, describe, digest, transcribe, speak, result."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

from pipelines import ingest
from pipelines.errors import InvalidToolResult
from pipelines.media import Capability, JobRequest
from pipelines.render import (
    NO_SPEECH_LINE,
    audio_tag,
    pending_line,
    render_with_jobs,
    result_note,
)
from pipelines.results import NO_SPEECH_NOTE, Status
from pipelines.speech.text import prepare
from workers.cli.common import (
    CliError,
    broker_fault,
    connect_client,
    enabled_capabilities,
    job_rows,
    print_json,
    read_input,
    read_text,
    run_jobs,
    served_catalog,
)
from workers.cli.outcomes import failure_line, job_exit
from workers.core.settings import Settings

# A media file given where a tool result goes: which command takes one.
NOT_A_RESULT = " (ingest reads an MCP tool result; for one file: describe, transcribe or digest)"


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    text = read_input(args.file, NOT_A_RESULT)
    try:
        rendered = ingest(
            text,
            cache=settings.media_cache(),
            server=args.server,
            capabilities=enabled_capabilities(settings),
        )
    except InvalidToolResult as exc:
        raise CliError(f"{exc}{NOT_A_RESULT}") from None
    trace_id = args.trace_id or uuid.uuid4().hex[:16]
    try:
        handles = run_jobs(args, settings, rendered.jobs, trace_id)
    except Exception as exc:
        fault = broker_fault(exc)
        if fault is None:
            raise
        # Fail-open: the agent text (every MEDIA: line) still goes out, without the jobs.
        sys.stderr.write(f"mcp-media: no jobs submitted ({fault.outcome}): {fault.message}\n")
        handles = []
    agent_text = render_with_jobs(rendered, handles) if handles else rendered.text
    if args.json:
        out: dict[str, Any] = dict(rendered.to_json())
        out["text"] = agent_text
        out["trace_id"] = trace_id
        if handles:
            out["jobs"] = job_rows(handles)
        print_json(out)
    else:
        sys.stdout.write(agent_text + "\n")
    return 0


def cmd_describe(args: argparse.Namespace, settings: Settings) -> int:
    from workers.cli.single import store_file

    stored = store_file(settings, Path(args.image), "image")
    job = JobRequest(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
    handles = run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    (handle,) = handles
    if args.json:
        print_json(handle.to_json())
    elif handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
    else:
        note = result_note(handle.envelope)
        reason = handle.envelope.reason or "no summary"
        sys.stdout.write((note or f"[no summary: {reason}]") + "\n")
    return job_exit(handle.envelope, bool(args.wait))


def cmd_digest(args: argparse.Namespace, settings: Settings) -> int:
    """One document file (PDF, DOCX, PPTX, XLSX, HTML, text), cached and digested: the
    digest as the agent sees it, and where its whole text is saved."""
    from workers.cli.single import store_file

    stored = store_file(settings, Path(args.file), "document")
    job = JobRequest(Capability.DOCUMENT_DIGEST, stored.sha256, stored.path)
    (handle,) = run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    if args.json:
        print_json(handle.to_json())
    elif handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
    elif handle.envelope.status is not Status.DONE:
        sys.stderr.write(failure_line("digest", handle.envelope))
        return job_exit(handle.envelope, True)
    else:
        sys.stdout.write((result_note(handle.envelope) or "[no text read]") + "\n")
    return job_exit(handle.envelope, bool(args.wait))


def _transcript_json(handle: Any) -> dict[str, Any]:
    out = handle.envelope.output if handle.envelope is not None else {}
    return {
        "text": out.get("text"),
        "note": out.get("note") or (NO_SPEECH_NOTE if out.get("text") == "" else None),
        "segments": [
            {"start": seg["start"], "end": seg["end"], "text": seg["text"]}
            for seg in out.get("segments", [])
        ],
        **({"words": out["words"]} if "words" in out else {}),
        "language": out.get("language"),
        "duration_s": out.get("duration_s"),
        "engine": out.get("engine"),
        "model": out.get("model"),
        "status": handle.status.value,
        "id": handle.id,
        "reason": handle.envelope.reason if handle.envelope is not None else None,
        "outcome": _outcome(handle),
    }


def _outcome(handle: Any) -> str | None:
    """The code of the handle's result, when it is not done."""
    envelope = handle.envelope
    return envelope.outcome.value if envelope is not None and envelope.outcome else None


def cmd_transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.speech.transcript import Transcript, format_transcript
    from workers.cli.single import store_file

    stored = store_file(settings, Path(args.file), "audio")
    job = JobRequest(Capability.AUDIO_TRANSCRIBE, stored.sha256, stored.path)
    given = {"language": args.language, "words": "1" if args.words else None}
    params = {k: v for k, v in given.items() if v} or None
    trace_id = args.trace_id or uuid.uuid4().hex[:16]
    (handle,) = run_jobs(args, settings, [job], trace_id, params)
    if args.json:
        print_json(_transcript_json(handle))
        return job_exit(handle.envelope, bool(args.wait))
    if handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
        return job_exit(None, bool(args.wait))
    if handle.envelope.status is not Status.DONE:
        sys.stderr.write(failure_line("transcription", handle.envelope))
        return job_exit(handle.envelope, True)
    out = handle.envelope.output
    if not out["text"] and args.format == "text":
        sys.stdout.write(NO_SPEECH_LINE + "\n")  # nobody speaks: say so, not nothing
        return 0
    if not out["text"] and args.format in ("srt", "vtt"):
        sys.stderr.write(f"mcp-media: {NO_SPEECH_LINE}\n")  # an empty cue file stays valid
    transcript = Transcript.from_dict(
        {**out, "note": out.get("note") or (None if out["text"] else NO_SPEECH_NOTE)}
    )
    text = format_transcript(transcript, args.format, words=args.words)
    sys.stdout.write(text.rstrip("\n") + "\n")
    return 0


def cmd_speak(args: argparse.Namespace, settings: Settings) -> int:
    from workers.core.stage_configs import store_request, synthesis_request

    text = read_text(args.text)
    # The text rules are cheap and bounded: refuse text that cannot be spoken here, in one
    # line, before anything is stored or enqueued (the worker checks again).
    prepare(text, settings.tts.max_chars)
    served = served_catalog(args, settings)
    if args.voice:
        from pipelines.errors import ConfigError
        from workers.core.catalog import VoiceNotFound

        try:  # an unknown voice: one line, here, naming what the workers serve
            args.voice = served.resolve_voice(args.voice, None, settings.api.voices)
        except VoiceNotFound as exc:
            raise ConfigError(str(exc)) from None
    args.voice = args.voice or served.voice or None
    if args.voice:
        settings.tts.voice = args.voice
    if args.stream:
        from workers.cli.streaming import speak_stream

        return speak_stream(settings, text, args)
    params = synthesis_request(text, settings, args.format, args.speed, args.voice)
    request = store_request(settings, params)
    job = JobRequest(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
    if not args.inline and args.wait is None:
        args.wait = 120.0  # speaking is the whole point of the command: wait by default
    (handle,) = run_jobs(args, settings, [job], args.trace_id or uuid.uuid4().hex[:16])
    out = handle.envelope.output if handle.envelope is not None else {}
    path = out.get("path")
    if path and args.out:
        import shutil

        shutil.copyfile(path, args.out)
        path = str(Path(args.out).resolve())
    media_tag = None
    if path:
        media_tag = audio_tag(path, str(out.get("format", params["format"])))
    row = {
        "path": path,
        "format": out.get("format", params["format"]),
        "duration_s": out.get("duration_s"),
        "media_tag": media_tag,
        "status": handle.status.value,
        "sha256": out.get("audio_sha256"),
        "engine": out.get("engine"),
        "model": out.get("model"),
    }
    if args.json:
        row["id"] = handle.id
        row["reason"] = handle.envelope.reason if handle.envelope is not None else None
        row["outcome"] = _outcome(handle)
        print_json(row)
    elif media_tag:
        sys.stdout.write(f"{media_tag}\n")
        sys.stderr.write(f"mcp-media: {row['duration_s']} s of speech\n")
    elif handle.envelope is None:
        sys.stdout.write(pending_line(job.capability.value, handle.id) + "\n")
    else:
        sys.stderr.write(failure_line("speech", handle.envelope))
    return job_exit(handle.envelope, bool(args.wait))


def cmd_result(args: argparse.Namespace, settings: Settings) -> int:
    client = connect_client(settings, bounded=True)
    try:
        job_id, key, envelope = client.result(args.ident)
        status = envelope.status.value if envelope else None
        if envelope is None and key is not None:
            status = "running" if client.state.claims.claimed(key) else "pending"
    finally:
        client.close()
    if key is None:
        # Neither a job id the cluster knows nor the sha256 of a result or a job in flight.
        message = f"no job or result is known by {args.ident!r} (a job id or a sha256)"
        if args.json:
            print_json({"id": args.ident, "status": "unknown", "result": None, "error": message})
        else:
            sys.stderr.write(f"mcp-media: error: {message}\n")
        return 1
    row = {
        "id": job_id,
        "capability": key.capability.value,
        "sha256": key.sha256,
        "status": status,
        "result": envelope.to_json() if envelope else None,
    }
    if args.json:
        print_json(row)
    else:
        sys.stdout.write(f"{row['id'] or '-'} {row['capability']} {row['status']}\n")
        if envelope is not None:
            note = result_note(envelope)
            sys.stdout.write((note or f"reason: {envelope.reason}") + "\n")
    return 0
