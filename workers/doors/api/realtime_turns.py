"""One committed turn of a Realtime transcription session, transcribed as a job through the
gateway (dedup, admission, metrics, the live lane), like an upload to
`/v1/audio/transcriptions`: its PCM wrapped as a WAV file in the cache (the job decodes and
resamples any rate), the segments relayed as `.delta` events while the worker hears them,
then `.completed` with the whole text, or `.failed` with the error the door's outcome table
gives the job's failure."""

from __future__ import annotations

import io
import json
import wave
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import to_thread

from pipelines.media import Capability, MediaKind, StoredBlob
from pipelines.speech.transcript import Transcript
from workers.core import keys
from workers.core.settings import Settings
from workers.doors.api import jobs
from workers.doors.api.context import ApiContext
from workers.doors.api.errors import ApiError
from workers.doors.api.realtime_events import SessionConfig, server_event
from workers.doors.api.relay import Relay

Send = Callable[[dict[str, Any]], Awaitable[None]]
DELTA = "conversation.item.input_audio_transcription.delta"


def wav_of(pcm: bytes, rate: int) -> bytes:
    """PCM16 mono as a WAV file (an odd trailing byte, half a sample, is dropped)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm[: len(pcm) - len(pcm) % 2])
    return out.getvalue()


def _store(settings: Settings, data: bytes) -> StoredBlob:
    return settings.media_cache().store_bytes(
        data, MediaKind.AUDIO, mime="audio/wav", name="realtime-turn.wav"
    )


class Turn:
    """The events of one turn, `item` the conversation item its transcript belongs to."""

    def __init__(self, ctx: ApiContext, config: SessionConfig, item: str, send: Send) -> None:
        self.ctx = ctx
        self.config = config
        self.item = item
        self.send = send
        self.said: list[str] = []  # the deltas sent

    async def delta(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        piece = f" {text}" if self.said else text
        self.said.append(piece)
        await self.send(server_event(DELTA, item_id=self.item, content_index=0, delta=piece))

    async def run(self, pcm: bytes) -> None:
        try:
            transcript = await self._transcribe(pcm)
        except ApiError as exc:
            error = {"type": "server_error" if exc.status >= 500 else "invalid_request_error",
                     "code": exc.code, "message": exc.message, "param": exc.param}  # fmt: skip
            await self.send(
                server_event(
                    "conversation.item.input_audio_transcription.failed",
                    item_id=self.item,
                    content_index=0,
                    error=error,
                )
            )
            return
        if not self.said:  # answered from a stored result: its segments as deltas
            for segment in transcript.segments:
                await self.delta(segment.text)
        await self.send(
            server_event(
                "conversation.item.input_audio_transcription.completed",
                item_id=self.item,
                content_index=0,
                transcript=transcript.text,
                usage={"type": "duration", "seconds": round(transcript.duration_s, 3)},
            )
        )

    async def _transcribe(self, pcm: bytes) -> Transcript:
        ctx = self.ctx
        blob = await to_thread.run_sync(_store, ctx.settings, wav_of(pcm, self.config.rate))
        options = {"task": "transcribe"}
        if self.config.language:
            options["language"] = self.config.language
        capability = Capability.AUDIO_TRANSCRIBE
        key = await to_thread.run_sync(ctx.gateway.key, capability, blob.sha256, options)
        params = {**options, "stream": keys.chunks(key)}
        job = await jobs.submit(ctx, capability, blob.sha256, blob.path, params)
        envelope = None
        if not job.cached:
            relay = Relay(ctx, job)
            first, envelope = await relay.first()
            if envelope is None:
                async for data in relay.rest(first):
                    await self.delta(str(_segment_text(data)))
                envelope = relay.finished
        if envelope is None:
            envelope = await jobs.wait(ctx, job)
        return Transcript.from_dict(jobs.check_done(envelope, job.handle.id))


def _segment_text(data: bytes) -> str:
    found = json.loads(data)
    return str(found.get("text", "")) if isinstance(found, dict) else ""
