"""`/v1/audio/transcriptions` and `/v1/audio/translations`: an upload streamed into the
cache, one STT job (or its stored result), the answer in the format asked for.

Of OpenAI's fields, `language` selects the recognizer's language (English-only models take
only `en`) and is part of the job's key; a Chinese tag also picks the script of the text
(`zh-Hans`/`zh-CN` Simplified, `zh-Hant` Traditional, `zh-TW`/`zh-HK` their own standards,
plain `zh` the configured default, MCP_MEDIA_STT__CHINESE_SCRIPT); `prompt` and
`temperature` are accepted and ignored: our whisper decodes greedily and takes no prompt.
`timestamp_granularities[]=word` times each word (whisper's cross-attention alignment): the
`words` of `verbose_json` (with `segment` too, both; else words alone, as OpenAI answers), one
cue per word in `srt` and `vtt`; the formats without times ignore it. Timed words are a job
option, so they are part of the job's key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from pipelines.media import Capability
from pipelines.results import Status
from pipelines.speech.chinese_script import split_language
from pipelines.speech.transcript import Transcript, to_srt, to_vtt
from workers.core import keys
from workers.core.catalog import SttModel
from workers.doors.api import jobs
from workers.doors.api.catalog import catalog, stt_model
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.models import made_by
from workers.doors.api.relay import Relay
from workers.doors.api.uploads import Form, read_form

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
TIMED_FORMATS = ("verbose_json", "srt", "vtt")  # where word times can be written
LANGUAGE_NAMES = {
    "en": "english", "de": "german", "es": "spanish", "fr": "french", "it": "italian",
    "ja": "japanese", "pt": "portuguese", "ru": "russian", "zh": "chinese", "nl": "dutch",
}  # fmt: skip


def _options(model: SttModel, form: Form, task: str) -> dict[str, str]:
    """The job's options from the form, checked against what the serving model takes."""
    requested = form.get("model") or "whisper-1"
    if requested not in ("whisper-1", model.id):
        raise ApiError(
            400,
            f"model {requested!r} is not served here: use whisper-1 or {model.id} (GET /v1/models)",
            param="model",
            code="model_not_found",
        )
    fmt = form.get("response_format") or "json"
    if fmt not in FORMATS:
        raise ApiError(
            400, f"response_format must be one of {', '.join(FORMATS)}", param="response_format"
        )
    temperature = form.get("temperature")
    if temperature:
        try:
            value = float(temperature)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            raise ApiError(400, "temperature must be a number from 0 to 1", param="temperature")
    granularities = form.fields.get("timestamp_granularities[]", [])
    for name in granularities:
        if name not in ("segment", "word"):
            raise ApiError(
                400, f"unknown timestamp granularity {name!r}", param="timestamp_granularities[]"
            )
    options = {"task": task}
    if "word" in granularities and fmt in TIMED_FORMATS:
        if not model.word_timestamps:
            raise ApiError(
                400,
                f"{model.id} cannot time words: only mcp-media's own whisper export does"
                " (sherpa-onnx folders cannot); a whisper folder prepared before word"
                " timestamps needs `mcp-media models prepare` again",
                param="timestamp_granularities[]",
                code="word_timestamps_unsupported",
            )
        options["words"] = "1"
    language = (form.get("language") or "").strip().lower()
    if task == "translate" and not model.multilingual:
        raise ApiError(
            400,
            f"{model.id} is an English-only model: it cannot translate; configure a "
            "multilingual whisper model (MCP_MEDIA_STT__MODEL_DIR) for translations",
            param="model",
            code="translation_unsupported",
        )
    if language and task == "transcribe":
        if not model.takes(split_language(language)[0]):
            raise ApiError(
                400,
                f"{model.id} is an English-only model: language {language!r} is not available",
                param="language",
                code="unsupported_language",
            )
        options["language"] = language
    return options


def _answer(transcript: Transcript, fmt: str, task: str, granularities: list[str]) -> Response:
    words = "word" in granularities
    match fmt:
        case "text":
            return PlainTextResponse(transcript.text + "\n" if transcript.text else "")
        case "srt":
            return PlainTextResponse(to_srt(transcript, words))
        case "vtt":
            return PlainTextResponse(to_vtt(transcript, words), media_type="text/vtt")
        case "verbose_json":
            answer = verbose(transcript, task)
            if words:
                answer["words"] = openai_words(transcript)
                if "segment" not in granularities:
                    del answer["segments"]
            return JSONResponse(answer)
    return JSONResponse({"text": transcript.text, "usage": _usage(transcript)})


def _usage(transcript: Transcript) -> dict[str, Any]:
    return {"type": "duration", "seconds": round(transcript.duration_s)}


def verbose(transcript: Transcript, task: str) -> dict[str, Any]:
    """OpenAI's verbose_json: segments with start/end and what whisper's decoding said of
    each one's window (tokens, seek in 10 ms frames, avg_logprob, compression_ratio,
    no_speech_prob); greedy decoding, so temperature 0."""
    return {
        "task": task,
        "language": LANGUAGE_NAMES.get(transcript.language, transcript.language),
        "duration": round(transcript.duration_s, 3),
        "text": transcript.text,
        "segments": [
            {
                "id": index,
                "seek": segment.seek,
                "start": segment.start,
                "end": segment.end,
                "text": segment.text,
                "tokens": list(segment.tokens),
                "temperature": 0.0,
                "avg_logprob": segment.avg_logprob,
                "compression_ratio": segment.compression_ratio,
                "no_speech_prob": segment.no_speech_prob,
            }
            for index, segment in enumerate(transcript.segments)
        ],
        "usage": _usage(transcript),
    }


def openai_words(transcript: Transcript) -> list[dict[str, Any]]:
    """The transcript's words as OpenAI writes them: no surrounding punctuation."""
    found = []
    for word in transcript.words or ():
        text = word.word.strip(_PUNCTUATION)
        if text:
            found.append({"word": text, "start": word.start, "end": word.end})
    return found


_PUNCTUATION = " \"'“”‘’¿¡([{«»}])-.,;:!?。，、！？：；"


def _delta(text: str) -> bytes:
    return (
        f"data: {json.dumps({'type': 'transcript.text.delta', 'delta': text + ' '})}\n\n".encode()
    )


def _done(transcript: Transcript) -> bytes:
    done = {"type": "transcript.text.done", "text": transcript.text, "usage": _usage(transcript)}
    return f"data: {json.dumps(done)}\n\n".encode()


def _events(transcript: Transcript) -> AsyncIterator[bytes]:
    """A finished transcript as events: one delta per segment, then done."""

    async def events() -> AsyncIterator[bytes]:
        for segment in transcript.segments:
            yield _delta(segment.text)
        yield _done(transcript)

    return events()


def _live(ctx: ApiContext, relay: Relay, first: list[bytes]) -> AsyncIterator[bytes]:
    """Deltas as the worker hears each segment, then done from the stored result."""

    async def events() -> AsyncIterator[bytes]:
        async for data in relay.rest(first):
            yield _delta(str(json.loads(data).get("text", "")))
        envelope = relay.finished or await jobs.wait(ctx, relay.job)
        if envelope.status is Status.DONE:  # else the stream ends without `done`
            yield _done(Transcript.from_dict(envelope.output))

    return events()


def routes(ctx: ApiContext) -> list[BaseRoute]:
    async def run(request: Request, task: str) -> Response:
        form = await read_form(request, ctx.settings)
        assert form.blob is not None
        options = _options(stt_model(await catalog(ctx)), form, task)
        blob = form.blob
        stream = (form.get("stream") or "").lower() == "true"
        params: dict[str, str] = dict(options)
        if stream:
            key = await to_thread.run_sync(
                ctx.gateway.key, Capability.AUDIO_TRANSCRIBE, blob.sha256, options
            )
            params["stream"] = keys.chunks(key)
        job = await jobs.submit(ctx, Capability.AUDIO_TRANSCRIBE, blob.sha256, blob.path, params)
        if stream and not job.cached:
            relay = Relay(ctx, job)
            first, finished = await relay.first()
            if finished is None:
                return StreamingResponse(_live(ctx, relay, first), media_type="text/event-stream")
            job = replace(job, handle=replace(job.handle, envelope=finished))
        envelope = await jobs.wait(ctx, job)
        output = jobs.check_done(envelope, job.handle.id)
        transcript = Transcript.from_dict(output)
        if stream:
            answer: Response = StreamingResponse(
                _events(transcript), media_type="text/event-stream"
            )
        else:
            granularities = form.fields.get("timestamp_granularities[]", [])
            answer = _answer(transcript, form.get("response_format") or "json", task, granularities)
        answer.headers.update(made_by(output))
        return answer

    async def transcriptions(request: Request) -> Response:
        return await run(request, "transcribe")

    async def translations(request: Request) -> Response:
        return await run(request, "translate")

    return [
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/translations", translations, methods=["POST"]),
    ]
