"""mcp-media's own MCP tools: describe_image, transcribe_audio, speak, media_result,
media_status, read_document. Served beside the upstreams' tools by the proxy, and alone by
`mcp-media mcp`.

Inputs name a cached sha256, an `mcp-media://media/<sha256>` URI, or a file inside one of
the allowed roots (none unless given): never an arbitrary file.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types

from pipelines.ingest import validate_image
from pipelines.media import BlobError, Capability, JobRequest, MediaKind
from pipelines.outcomes import Outcome
from pipelines.render import audio_tag, pending_line, result_note
from pipelines.results import Envelope, ResultKey, Status
from pipelines.rewrite import MEDIA_URI_PREFIX
from pipelines.speech.transcript import Transcript, format_transcript
from workers.core.catalog import VoiceNotFound
from workers.core.gateway import JobHandle
from workers.core.stage_configs import store_request, synthesis_request
from workers.doors.mcp import read_document as docs
from workers.doors.mcp.media_resources import TEMPLATE as MEDIA_TEMPLATE
from workers.doors.mcp.media_resources import media_page
from workers.doors.mcp.outcomes import ADVICE, door_failure, failure_line, job_line, tool_error
from workers.doors.mcp.rewriter import MCP_FETCH, MediaRewriter
from workers.doors.mcp.tool_definitions import WIRE, made_by

log = logging.getLogger("mcp_media.tools")
# The SDK's types of the own tools, made from their one wire form.
DEFINITIONS = [types.Tool.model_validate(tool, by_name=False) for tool in WIRE]


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@dataclass(frozen=True)
class TaskWait:
    """Set (in `TASK`) around a call an MCP task runs (workers.doors.mcp.tasks): the task is told
    of the job as soon as it is submitted (its id, to cancel it), and waits `wait` seconds
    for its end, whatever the call's own `wait` says."""

    submitted: Callable[[JobHandle, str | None], None]  # the job, the queue no worker serves
    wait: float


TASK: ContextVar[TaskWait | None] = ContextVar("task", default=None)


class ToolInputError(Exception):
    """A tool argument is unusable; the message is shown to the model."""


class OwnTools:
    def __init__(
        self,
        rewriter: MediaRewriter,
        allowed_roots: Sequence[Path] = (),
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        self.rewriter = rewriter
        self.hidden = hidden  # not offered: nothing can serve them (no model, no workers)
        self.settings = rewriter.settings
        self.roots = [root.resolve() for root in allowed_roots]
        self._calls: dict[str, Callable[[dict[str, Any]], Awaitable[types.CallToolResult]]] = {
            "describe_image": self._describe,
            "transcribe_audio": self._transcribe,
            "speak": self._speak,
            "media_result": self._result,
            "media_status": self._status,
            "read_document": self._read_document,
        }

    def definitions(self) -> list[types.Tool]:
        return [tool for tool in DEFINITIONS if tool.name not in self.hidden]

    def has(self, name: str) -> bool:
        return name in self._calls

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            return await self._calls[name](arguments)
        except ToolInputError as exc:
            return error_result(f"{name}: {exc}")
        except Exception as exc:  # the broker, the disk, a bug: the model hears it, we serve on
            failure = door_failure(exc, self.rewriter.gateway)
            if failure.outcome is Outcome.INTERNAL and isinstance(exc, BlobError):
                return error_result(f"{name}: {exc}")  # the input, in the cache's words
            log.error("tool %s failed: %s", name, failure_line(failure), exc_info=exc)
            return error_result(tool_error(name, failure))

    def media_resources(
        self, cursor: str | None, before: Sequence[types.Resource] = ()
    ) -> types.ListResourcesResult:
        """resources/list: `before` (the upstreams') then a page of cached media."""
        return media_page(self.settings.media_cache(), cursor, before)

    def resource_templates(self) -> list[types.ResourceTemplate]:
        return [MEDIA_TEMPLATE]

    def cached(self, sha256: str) -> tuple[Path, str] | None:
        """Any cached media by sha256, documents too: every link the door hands out."""
        cache = self.settings.media_cache()
        found = cache.find(sha256) or cache.find_document(sha256)
        if found is None:
            return None
        mime = mimetypes.guess_type(found.path.name)[0] or "application/octet-stream"
        return found.path, mime

    # inputs

    def _media(self, value: Any, kind: MediaKind) -> JobRequest:
        if not isinstance(value, str) or not value:
            raise ToolInputError(f"name the {kind.value} by sha256, mcp-media:// URI or path")
        sha = value.removeprefix(MEDIA_URI_PREFIX)
        capability = (
            Capability.VISION_SUMMARIZE
            if kind is MediaKind.IMAGE
            else (Capability.AUDIO_TRANSCRIBE)
        )
        found = self.settings.media_cache().find(sha)
        if found is not None:
            if found.kind is not kind:
                raise ToolInputError(f"{sha} is cached as {found.kind.value}, not {kind.value}")
            return JobRequest(capability, sha, found.path)
        if value.startswith(MEDIA_URI_PREFIX) or (len(value) == 64 and value.isalnum()):
            raise ToolInputError(f"no cached {kind.value} {value}")
        path = Path(value).expanduser()
        real = path.resolve()
        if not any(real.is_relative_to(root) for root in self.roots):
            raise ToolInputError(
                f"{value} is not inside an allowed root "
                f"({', '.join(map(str, self.roots)) or 'none configured: pass --allow-root DIR'})"
            )
        if not real.is_file():
            raise ToolInputError(f"{value}: no such file")
        check = validate_image if kind is MediaKind.IMAGE else None
        stored = self.settings.media_cache().store_file(real, kind, validate=check)
        return JobRequest(capability, stored.sha256, stored.path)

    def _wait(self, arguments: dict[str, Any]) -> float:
        wait = arguments.get("wait", self.rewriter.options.wait)
        if not isinstance(wait, int | float) or wait < 0:
            raise ToolInputError("wait must be a number of seconds >= 0")
        return float(wait)

    async def _run(
        self, job: JobRequest, wait: float, params: Mapping[str, Any] | None = None
    ) -> tuple[JobHandle, str | None]:
        """The job's handle once it ended or `wait` ran out, and the queue no live worker
        serves if that is its (it stays queued: waiting for it then only waits the wait out,
        so a plain call answers at once; a task's waits, a worker may yet start)."""
        task = TASK.get()
        if task is None:
            return await anyio.to_thread.run_sync(self._served, job, wait, params)

        # A task's call: told of the job as it is submitted, then waits here without holding
        # a thread.
        def submit() -> tuple[JobHandle, str | None]:
            handle, idle = self._served(job, 0, params)
            task.submitted(handle, idle)
            return handle, idle

        handle, idle = await anyio.to_thread.run_sync(submit)
        return await self.rewriter.gateway.wait_async(handle, task.wait), idle

    def _served(
        self, job: JobRequest, wait: float, params: Mapping[str, Any] | None
    ) -> tuple[JobHandle, str | None]:
        (handle,) = self.rewriter.run([job], 0, params)
        idle = next(iter(self.rewriter.gateway.unserved([handle])), None)
        if wait > 0 and idle is None and not handle.status.finished:
            (handle,) = self.rewriter.gateway.wait([handle], wait)
        return handle, idle

    # tools

    async def _describe(self, arguments: dict[str, Any]) -> types.CallToolResult:
        job = self._media(arguments.get("image"), MediaKind.IMAGE)
        handle, idle = await self._run(job, self._wait(arguments))
        summary = None
        if handle.envelope is not None and handle.envelope.status is Status.DONE:
            summary = handle.envelope.output.get("summary")
        return self._job_result(handle, {"summary": summary}, idle=idle)

    async def _transcribe(self, arguments: dict[str, Any]) -> types.CallToolResult:
        fmt = arguments.get("format", "text")
        if fmt not in ("text", "srt", "vtt", "segments"):
            raise ToolInputError("format must be text, srt, vtt or segments")
        words = arguments.get("words", False)
        if not isinstance(words, bool):
            raise ToolInputError("words must be true (time each word) or false")
        if words:
            stt = (await anyio.to_thread.run_sync(self.rewriter.gateway.catalog)).stt
            if stt is not None and not stt.word_timestamps:  # what the stt workers announce
                raise ToolInputError(
                    f"{stt.id} cannot time words: only whisper prepared by mcp-media can"
                    " (`mcp-media models prepare`); call again without words"
                )
        job = self._media(arguments.get("audio"), MediaKind.AUDIO)
        handle, idle = await self._run(
            job, self._wait(arguments), {"words": "1"} if words else None
        )
        out = handle.envelope.output if handle.envelope is not None else {}
        extra = {
            "text": out.get("text"),
            "language": out.get("language"),
            "segments": list(out.get("segments", [])),
            "words": out.get("words"),
            **made_by(out),
        }
        shown = None
        if handle.envelope is not None and handle.envelope.status is Status.DONE:
            shown = _formatted(out, fmt, words)
        return self._job_result(handle, extra, shown, idle)

    async def _speak(self, arguments: dict[str, Any]) -> types.CallToolResult:
        text = arguments.get("text")
        fmt = arguments.get("format", "ogg")
        if not isinstance(text, str) or not text.strip():
            raise ToolInputError("text must be a non-empty string")
        voice = arguments.get("voice")
        if voice is not None and (not isinstance(voice, str) or not voice.strip()):
            raise ToolInputError("voice must be a voice name")
        served = await anyio.to_thread.run_sync(self.rewriter.gateway.catalog)
        if voice is not None:
            try:
                voice = served.resolve_voice(voice.strip(), None, self.settings.api.voices)
            except VoiceNotFound as exc:
                raise ToolInputError(str(exc)) from None
        voice = voice or served.voice or None
        params = synthesis_request(
            text, self.settings, fmt if isinstance(fmt, str) else None, voice=voice
        )
        request = store_request(self.settings, params)
        job = JobRequest(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
        handle, idle = await self._run(job, self._wait(arguments))  # 0: answer at once
        out = handle.envelope.output if handle.envelope is not None else {}
        result = self._job_result(
            handle,
            {"format": params["format"], "duration_s": out.get("duration_s"), **made_by(out)},
            idle=idle,
        )
        if handle.envelope is not None and handle.envelope.status is Status.DONE:
            spoken = self._speech(out)
            if spoken is not None:
                result.content, path = spoken
                assert result.structured_content is not None
                result.structured_content["path"] = str(path)
        return result

    async def _result(self, arguments: dict[str, Any]) -> types.CallToolResult:
        ident = arguments.get("id")
        if not isinstance(ident, str) or not ident:
            raise ToolInputError("id must be a job id or a sha256")
        key, envelope = await anyio.to_thread.run_sync(self._find, ident)
        if key is None:
            return error_result(f"media_result: no job or result known for {ident!r}")
        if envelope is None:
            structured: dict[str, Any] = {
                "status": "pending",
                "capability": key.capability.value,
                "result": None,
            }
            text = pending_line(key.capability.value, ident, MCP_FETCH)
        else:
            text = result_note(envelope, ADVICE) or job_line(envelope)
            structured = {
                "status": envelope.status.value,
                "capability": key.capability.value,
                "result": _without_said(dict(envelope.to_json())),
            }
            made = envelope.status is Status.DONE and key.capability is Capability.AUDIO_SYNTHESIZE
            spoken = self._speech(envelope.output) if made else None
            if spoken is not None:
                return types.CallToolResult(content=spoken[0], structured_content=structured)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    def _find(self, ident: str) -> tuple[ResultKey | None, Envelope | None]:
        _, key, envelope = self.rewriter.gateway.result(ident)
        return key, envelope

    async def _status(self, arguments: dict[str, Any]) -> types.CallToolResult:
        gateway = self.rewriter.gateway
        waiting = await anyio.to_thread.run_sync(gateway.waiting)
        structured: dict[str, Any] = {
            "mode": "inline" if gateway.runs_here else "queued",
            "queues": {q: {"waiting": n} for q, n in waiting.items()},
        }
        lines = [f"jobs run {'in the door process' if gateway.runs_here else 'on the queues'}"]
        lines += [f"{q}: {n} waiting" for q, n in waiting.items()]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="\n".join(lines))],
            structured_content=structured,
        )

    async def _read_document(self, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            pages = docs.page_range(arguments.get("pages"))
            chars = docs.bounded_chars(arguments.get("max_chars"))
            cache = self.settings.media_cache()
            doc = await anyio.to_thread.run_sync(docs.locate, cache, arguments.get("document"))
            if not doc.has_text():  # digested elsewhere, not yet, or its Markdown is gone
                gateway, wait = self.rewriter.gateway, self._wait(arguments)
                handle = await anyio.to_thread.run_sync(docs.text_here, gateway, doc, wait)
                if handle is not None and not doc.has_text():  # running, or why not read
                    return error_result(f"read_document: {docs.not_read(handle, MCP_FETCH)}")
            text = await anyio.to_thread.run_sync(doc.text)
            part = docs.read_range(text, pages, arguments.get("offset"), chars)
        except docs.DocumentRefused as exc:
            raise ToolInputError(str(exc)) from None
        return docs.document_result(doc, part)

    def _speech(self, output: Mapping[str, Any]) -> tuple[list[types.ContentBlock], Path] | None:
        """What a finished speak job made, from this machine's cache (by its sha256, never a
        path the result names): its audio and its MEDIA: line. None when not there: the
        caller then says what the result says."""
        found = self.settings.media_cache().find(str(output.get("audio_sha256", "")))
        if found is None or found.kind is not MediaKind.AUDIO:
            return None
        try:
            data = base64.b64encode(found.path.read_bytes()).decode()
        except OSError as exc:
            log.warning("spoken audio %s not readable: %s", found.path, exc)
            return None
        fmt = str(output.get("format", found.path.suffix[1:]))
        mime = "audio/ogg" if fmt == "ogg" else "audio/wav"
        tag = audio_tag(found.path, fmt)
        blocks: list[types.ContentBlock] = [
            types.AudioContent(type="audio", data=data, mime_type=mime),
            types.TextContent(type="text", text=tag),
        ]
        return blocks, found.path

    def _job_result(
        self,
        handle: JobHandle,
        extra: dict[str, Any],
        shown: str | None = None,
        idle: str | None = None,
    ) -> types.CallToolResult:
        envelope = handle.envelope
        structured = {
            "status": handle.status.value,
            "id": handle.id,
            "sha256": handle.key.sha256,
            "path": str(handle.path),
            "reason": envelope.reason if envelope is not None else None,
            **extra,
        }
        if envelope is None:
            text = pending_line(handle.key.capability.value, handle.id, MCP_FETCH)
            if idle is not None:  # said at once, as the CLI and the HTTP door do
                structured["reason"] = (
                    f"no worker serves the '{idle}' queue: the job stays queued until one "
                    f"starts (`mcp-media worker --queues {idle}`, or `mcp-media up`)"
                )
                text = f"{text} {structured['reason']}"
        elif envelope.status is Status.DONE:
            text = shown or result_note(envelope) or "[done: nothing to say]"
        else:
            text = job_line(envelope)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=envelope is not None and envelope.status is Status.FAILED,
        )


# What the text block of media_result says already: a client that shows the model both the
# text and structuredContent (several do) would give it the summary or transcript twice.
_SAID = ("summary", "text")


def _without_said(result: dict[str, Any]) -> dict[str, Any]:
    """The result's envelope without the output its text block gives."""
    output = result.get("output")
    if isinstance(output, dict):
        result["output"] = {k: v for k, v in output.items() if k not in _SAID}
    return result


def _formatted(output: Any, fmt: str, words: bool = False) -> str:
    """The transcript as `fmt`; with `words`, one cue per word in srt/vtt, else the words
    as word@start-end (seconds) on a line after the text or segments."""
    if fmt in ("srt", "vtt"):
        return format_transcript(Transcript.from_dict(output), fmt, words)
    if fmt == "segments":
        shown = "\n".join(
            f"[{s['start']:.2f}-{s['end']:.2f}] {s['text']}" for s in output.get("segments", [])
        )
    else:
        shown = format_transcript(Transcript.from_dict(output), fmt)
    timed = output.get("words") if words else None
    if not timed:
        return shown
    listed = " ".join(f"{w['word']}@{w['start']:.2f}-{w['end']:.2f}" for w in timed)
    return f"{shown.rstrip()}\nwords: {listed}"
