"""`/v1/audio/speech`: one TTS job per request (or its stored result), the audio streamed to
the client as the worker finishes each sentence; `/v1/audio/voices` and `/v1/audio/models`:
what it can speak with, by name.

The job writes its encoded audio to a Redis stream as it goes (`workers.state.chunks`); this
process relays it, so the first bytes leave after one sentence's work, not the whole text's.
A request that joins a job someone else submitted without streaming gets the file once it
is done. `instructions` is accepted and ignored (piper voices take no style prompt).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from pipelines.media import Capability
from pipelines.results import Envelope
from workers.core import keys
from workers.core.catalog import Catalog
from workers.core.stage_configs import store_request, synthesis_request
from workers.doors.api import jobs
from workers.doors.api.bodies import read_json
from workers.doors.api.catalog import TTS_MODELS, catalog, resolve_voice, tts_models
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.models import made_by
from workers.doors.api.relay import Relay

# OpenAI's pcm: 16-bit little-endian mono at 24 kHz, every voice resampled to it by the job
# (pipelines.speech.encode), so a client that assumes OpenAI's rate plays it right; the rate is
# also in the content type and in X-Audio-Sample-Rate for the clients that read it.
PCM_RATE = 24_000
# OpenAI's response_format -> (the job's format, content type).
FORMATS = {
    "mp3": ("mp3", "audio/mpeg"),
    "opus": ("ogg", "audio/ogg"),
    "aac": ("aac", "audio/aac"),
    "flac": ("flac", "audio/flac"),
    "wav": ("wav", "audio/wav"),
    "pcm": ("pcm", f"audio/pcm;rate={PCM_RATE}"),
}
FILE_CHUNK = 64 * 1024


def _request(
    ctx: ApiContext, found: Catalog, data: dict[str, Any]
) -> tuple[dict[str, Any], str, str, bool]:
    """(job parameters, content type, stream_format, stream) from an OpenAI speech body,
    its model and voice among those the serving workers announce (`found`)."""
    settings = ctx.settings
    text = data.get("input")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "`input` must be a non-empty string", param="input")
    if len(text) > settings.tts.max_chars:
        raise ApiError(
            400,
            f"`input` is {len(text)} characters, over the {settings.tts.max_chars} limit",
            param="input",
            code="input_too_long",
        )
    model = data.get("model", "tts-1")
    served = tts_models(found)
    if not isinstance(model, str) or model not in served:
        raise ApiError(
            400, f"model {model!r} is not served here: use one of {', '.join(served)}"
            " (GET /v1/audio/models)", param="model", code="model_not_found",
        )  # fmt: skip
    voice = data.get("voice", "alloy")
    if isinstance(voice, dict):  # {"id": ...}: a custom voice by id
        voice = voice.get("id")
    if not isinstance(voice, str):
        raise ApiError(400, "`voice` must be a voice name", param="voice")
    # A prepared folder as the model narrows the voice to that folder's voices.
    chosen = resolve_voice(ctx, found, voice, None if model in TTS_MODELS else model)
    fmt = data.get("response_format", "mp3")
    if fmt not in FORMATS:
        raise ApiError(
            400, f"response_format must be one of {', '.join(FORMATS)}", param="response_format"
        )
    speed = data.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
        raise ApiError(400, "speed must be a number from 0.25 to 4.0", param="speed")
    stream_format = data.get("stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise ApiError(400, "stream_format must be audio or sse", param="stream_format")
    stream = data.get("stream", True)  # not OpenAI's: false waits for the whole file
    job_format, content_type = FORMATS[fmt]
    params = synthesis_request(text, settings, fmt=job_format, speed=float(speed), voice=chosen)
    return params, content_type, stream_format, stream is not False


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    handle = await to_thread.run_sync(path.open, "rb")
    try:
        while chunk := await to_thread.run_sync(handle.read, FILE_CHUNK):
            yield chunk
    finally:
        handle.close()


def _sse(audio: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async def events() -> AsyncIterator[bytes]:
        async for chunk in audio:
            event = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode()}
            yield f"data: {json.dumps(event)}\n\n".encode()
        done = {"type": "speech.audio.done", "usage": {"input_tokens": 0, "output_tokens": 0,
                                                       "total_tokens": 0}}  # fmt: skip
        yield f"data: {json.dumps(done)}\n\n".encode()

    return events()


def _rate(content_type: str) -> dict[str, str]:
    """The sample rate of raw audio, which has no header of its own to carry it."""
    return {"X-Audio-Sample-Rate": str(PCM_RATE)} if content_type.startswith("audio/pcm") else {}


def _respond(audio: AsyncIterator[bytes], content_type: str, stream_format: str) -> Response:
    headers = _rate(content_type)
    if stream_format == "sse":
        return StreamingResponse(_sse(audio), media_type="text/event-stream", headers=headers)
    return StreamingResponse(audio, media_type=content_type, headers=headers)


def _output_path(envelope: Envelope, job_id: str) -> Path:
    return Path(str(jobs.check_done(envelope, job_id)["path"]))


def _predicted(found: Catalog, voice: str) -> dict[str, str]:
    """What will make a stream still being spoken: the voice's folder and its engine, as the
    workers announce them."""
    model = found.model_of(voice)
    return made_by({"engine": model.engine, "model": model.id}) if model is not None else {}


def routes(ctx: ApiContext) -> list[BaseRoute]:
    async def speech(request: Request) -> Response:
        api = ctx.settings.api
        data = await read_json(request, api.max_speech_request_kb * 1024, api.head_timeout)
        found = await catalog(ctx)
        params, content_type, stream_format, stream = _request(ctx, found, data)
        blob = await to_thread.run_sync(store_request, ctx.settings, params)
        key = await to_thread.run_sync(ctx.gateway.key, Capability.AUDIO_SYNTHESIZE, blob.sha256)
        extra = {"stream": keys.chunks(key)} if stream else None
        job = await jobs.submit(ctx, Capability.AUDIO_SYNTHESIZE, blob.sha256, blob.path, extra)
        if job.cached or not stream:
            done = await jobs.wait(ctx, job)
            path = _output_path(done, job.handle.id)
            headers = made_by(done.output) | _rate(content_type)
            if stream_format == "audio":
                return FileResponse(path, media_type=content_type, headers=headers)
            answer = _respond(_file_chunks(path), content_type, stream_format)
            answer.headers.update(headers)
            return answer
        relay = Relay(ctx, job)
        first, envelope = await relay.first()
        if envelope is not None:  # a job that streams nothing (joined, or failed first)
            path = _output_path(envelope, job.handle.id)
            answer = _respond(_file_chunks(path), content_type, stream_format)
            answer.headers.update(made_by(envelope.output))
            return answer
        answer = _respond(relay.rest(first), content_type, stream_format)
        answer.headers.update(_predicted(found, str(params["voice"])))
        return answer

    async def list_voices(request: Request) -> JSONResponse:
        """Open WebUI and Kokoro-FastAPI's shape: `{"voices": [{"id", "name", ...}]}`."""
        found = await catalog(ctx)
        listed = [voice.to_json() for voice in found.voices]
        aliases = found.aliases(ctx.settings.api.voices)
        return JSONResponse({"voices": listed, "aliases": aliases})

    async def list_models(request: Request) -> JSONResponse:
        """OpenAI's model objects under `data`, and under `models` for Open WebUI (which
        reads `models` from `/audio/models`)."""
        data = [
            {"id": ident, "object": "model", "created": 0, "owned_by": "mcp-media"}
            for ident in tts_models(await catalog(ctx))
        ]
        return JSONResponse({"object": "list", "data": data, "models": data})

    return [
        Route("/v1/audio/speech", speech, methods=["POST"]),
        Route("/v1/audio/voices", list_voices, methods=["GET"]),
        Route("/v1/audio/models", list_models, methods=["GET"]),
    ]
