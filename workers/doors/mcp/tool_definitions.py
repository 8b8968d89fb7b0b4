"""The own MCP tools as a client sees them in `tools/list`: names, descriptions, input and
output schemas, annotations, in their wire JSON (`workers.doors.mcp.tools` serves them and
makes the SDK's types of them; the early answers list them as they are). No MCP SDK here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
# speak adds files to the cache (not read-only) and changes nothing else (not destructive);
# the same text, voice and format give the same request, hence the same answer (idempotent).
ADDS_TO_CACHE = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}

_JOB_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["pending", "done", "degraded", "failed"]},
        "id": {"type": "string"},
        "sha256": {"type": "string"},
        "path": {"type": ["string", "null"]},
        "reason": {"type": ["string", "null"]},
    },
    "required": ["status", "id", "sha256"],
}


def _schema(props: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


def _with(extra: dict[str, Any]) -> dict[str, Any]:
    return {**_JOB_OUTPUT, "properties": {**_JOB_OUTPUT["properties"], **extra}}


# The engine (native, sherpa-onnx) and model folder that made a speech result.
_MADE_BY = {"engine": {"type": ["string", "null"]}, "model": {"type": ["string", "null"]}}


def made_by(output: Mapping[str, Any]) -> dict[str, Any]:
    """The engine and model folder a speech result names (none for older results)."""
    return {"engine": output.get("engine"), "model": output.get("model")}


MEDIA_ARG = {
    "type": "string",
    "description": "a cached sha256, an mcp-media://media/<sha256> URI, or a file path inside "
    "an allowed root",
}
WAIT_ARG = {"type": "number", "minimum": 0, "description": "seconds to wait for the result"}

WIRE: list[dict[str, Any]] = [
    {
        "name": "describe_image",
        "description": "Summarise an image (vision model or local OCR); fail-open.",
        "inputSchema": _schema({"image": MEDIA_ARG, "wait": WAIT_ARG}, ["image"]),
        "outputSchema": _with({"summary": {"type": ["string", "null"]}}),
        "annotations": READ_ONLY,
    },
    {
        "name": "transcribe_audio",
        "description": "Speech to text for an audio clip, as text, srt, vtt or segments;"
        " with words, each word's start-end seconds too.",
        "inputSchema": _schema(
            {
                "audio": MEDIA_ARG,
                "format": {"type": "string", "enum": ["text", "srt", "vtt", "segments"]},
                "words": {
                    "type": "boolean",
                    "description": "time each word (whisper prepared by mcp-media): the words"
                    " as word@start-end seconds after the text or segments, one cue per word"
                    " in srt and vtt",
                },
                "wait": WAIT_ARG,
            },
            ["audio"],
        ),
        "outputSchema": _with(
            {
                "text": {"type": ["string", "null"]},
                "language": {"type": ["string", "null"]},
                "segments": {"type": "array", "items": {"type": "object"}},
                "words": {"type": ["array", "null"], "items": {"type": "object"}},
                **_MADE_BY,
            }
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "speak",
        "description": "Text to speech: an Ogg/Opus voice note (default) or WAV, with its"
        " MEDIA path.",
        "inputSchema": _schema(
            {
                "text": {"type": "string", "minLength": 1},
                "format": {"type": "string", "enum": ["ogg", "wav"]},
                "voice": {
                    "type": "string",
                    "description": "a prepared voice by name (af_bella, zf_xiaobei, a piper"
                    " folder), an OpenAI voice name (alloy, ...), or a Kokoro blend such as"
                    " af_bella(2)+af_sky(1); default: the configured voice",
                },
                "wait": WAIT_ARG,
            },
            ["text"],
        ),
        "outputSchema": _with(
            {
                "format": {"type": "string"},
                "duration_s": {"type": ["number", "null"]},
                **_MADE_BY,
            }
        ),
        "annotations": ADDS_TO_CACHE,
    },
    {
        "name": "media_result",
        "description": "The result of a media job, by job id or by the media's sha256.",
        "inputSchema": _schema({"id": {"type": "string"}}, ["id"]),
        "outputSchema": _schema(
            {
                "status": {"type": "string"},
                "capability": {"type": ["string", "null"]},
                "result": {"type": ["object", "null"]},
            },
            ["status"],
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "media_status",
        "description": "Where media jobs run (queues or this process) and what waits in"
        " each queue.",
        "inputSchema": _schema({}, []),
        "outputSchema": _schema(
            {"mode": {"type": "string"}, "queues": {"type": "object"}}, ["mode", "queues"]
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "read_document",
        "description": "The text of a cached document (PDF, DOCX, PPTX, XLSX, HTML, text) from"
        " its digest's saved Markdown, by pages or from a character offset, to read on from"
        " where the digest stopped.",
        "inputSchema": _schema(
            {
                "document": {
                    "type": "string",
                    "description": "a cached sha256, an mcp-media://media/<sha256> URI, or the"
                    " saved path (the document or its .md) inside the media cache",
                },
                "pages": {"type": "string", "description": 'a page, slide or sheet: "3" or "3-7"'},
                "offset": {"type": "integer", "minimum": 0, "description": "a character offset"},
                "max_chars": {"type": "integer", "minimum": 1, "maximum": 50000},
                "wait": WAIT_ARG,
            },
            ["document"],
        ),
        "outputSchema": _schema(
            {
                "sha256": {"type": "string"},
                "path": {"type": "string"},
                "text": {"type": "string"},
                "offset": {"type": "integer"},
                "next_offset": {"type": ["integer", "null"]},
                "total_chars": {"type": "integer"},
                "pages": {"type": "integer"},
                "truncated": {"type": "boolean"},
            },
            ["sha256", "path", "text", "offset", "total_chars"],
        ),
        "annotations": READ_ONLY,
    },
]
