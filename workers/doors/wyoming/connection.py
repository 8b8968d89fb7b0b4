"""One Wyoming connection: its events read within bounds and answered in order.

A request the door refuses (an unknown voice, a language the model lacks, a queue at its
high water, a failed job) is answered with an `error` event and the connection stays open;
an event that breaks the framing (an oversized length, a header that is not JSON, silence
past the idle bound) is answered with an `error` event and the connection closed, since
what follows can no longer be framed. Each connection's state is its own: no event of one
reaches another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from anyio import to_thread
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_write_event
from wyoming.info import Describe, SelectProgram
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from pipelines.media import Capability
from pipelines.outcomes import Outcome
from pipelines.speech.transcript import Transcript as SpokenText
from workers.core.gateway import JobGateway
from workers.doors.wyoming import jobs
from workers.doors.wyoming.asr import AudioFormat, Recording, job_options
from workers.doors.wyoming.describe import PROGRAM, CatalogCache, info_of
from workers.doors.wyoming.events import parsed
from workers.doors.wyoming.framing import FrameError, read_event
from workers.doors.wyoming.limits import Limits
from workers.doors.wyoming.outcomes import Refused, door_failure, error_event
from workers.doors.wyoming.tts import Speaker, SpokenStream, choose_voice

log = logging.getLogger(__name__)

DRAIN_BYTES = 1 << 20  # of a connection closed for a broken frame, read and dropped at most
DRAIN_SECONDS = 2.0
TRANSCRIPT_STREAMING = False
SYNTHESIZE_STREAMING = True


async def drain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float) -> None:
    """Half-close, then read and drop what the peer still sends, within bounds: a socket
    closed with unread data is reset by the kernel, and the peer may never read the error
    it was sent."""
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(seconds):
            left = DRAIN_BYTES
            while left > 0 and (data := await reader.read(min(left, 64 * 1024))):
                left -= len(data)


@dataclass
class Door:
    """What every connection shares: the gateway, the bounds, the catalog it describes."""

    gateway: JobGateway
    limits: Limits
    catalog: CatalogCache
    open: set[asyncio.Task[None]] = field(default_factory=set)


class Connection:
    def __init__(
        self, door: Door, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.door = door
        self.reader = reader
        self.writer = writer
        self.gateway = door.gateway
        self.limits = door.limits
        self.transcribe: Transcribe | None = None
        self.recording: Recording | None = None
        self.refused_audio = False  # the utterance was refused: drop its chunks till audio-stop
        self.speaker = Speaker(door.gateway, door.limits, self.write)
        self.streaming: SpokenStream | None = None

    async def write(self, event: Event) -> None:
        await async_write_event(event, self.writer)

    async def run(self) -> None:
        try:
            while True:
                try:
                    event = await read_event(self.reader, self.limits)
                except FrameError as exc:
                    log.info("wyoming: closing a connection: %s", exc.text)
                    await self.write(error_event(Refused(exc.outcome, exc.text).failure))
                    await drain(self.reader, self.writer, DRAIN_SECONDS)
                    return
                if event is None:
                    return
                await self.answer(event)
        except (ConnectionError, asyncio.IncompleteReadError):
            return  # the peer went away
        finally:
            if self.recording is not None:
                self.recording.discard()
            if self.streaming is not None:
                self.streaming.cancel()
            with contextlib.suppress(ConnectionError, OSError):
                self.writer.close()

    async def answer(self, event: Event) -> None:
        try:
            await self.dispatch(event)
        except Refused as exc:
            await self.write(error_event(exc.failure))
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as exc:
            failure = door_failure(exc, self.gateway)
            if failure.outcome is Outcome.INTERNAL:
                log.exception("wyoming: %s failed", event.type)
            await self.write(error_event(failure))

    async def dispatch(self, event: Event) -> None:
        kind = event.type
        if Describe.is_type(kind):
            found = self.door.catalog.catalog
            await self.write(info_of(found, TRANSCRIPT_STREAMING, SYNTHESIZE_STREAMING).event())
        elif SelectProgram.is_type(kind):  # newer clients name the program they want
            name = parsed(SelectProgram, event).name
            if name != PROGRAM:
                raise Refused(Outcome.UNSUPPORTED, f"no program {name!r} here: {PROGRAM} is")
        elif Ping.is_type(kind):
            await self.write(Pong(text=parsed(Ping, event).text).event())
        elif Transcribe.is_type(kind):
            request = parsed(Transcribe, event)
            try:  # refused before the audio is spent: its audio is dropped
                job_options(self.door.catalog.catalog.stt, request)
            except Refused:
                self.refused_audio = True
                raise
            self.transcribe = request
        elif AudioStart.is_type(kind):
            if not self.refused_audio:
                self._start(AudioFormat.of(parsed(AudioStart, event)))
        elif AudioChunk.is_type(kind):
            await self._chunk(parsed(AudioChunk, event))
        elif AudioStop.is_type(kind):
            await self._stop()
        elif Synthesize.is_type(kind):
            if self.streaming is None:  # inside a stream it repeats the streamed text
                said = parsed(Synthesize, event)
                await self.speaker.speak(said.text, self._voice(said.voice))
        elif SynthesizeStart.is_type(kind):
            start = parsed(SynthesizeStart, event)
            if self.streaming is not None:  # a new stream ends the old one unheard
                self.streaming.cancel()
                self.streaming = None
            voice = self._voice(start.voice)
            self.streaming = SpokenStream(self.speaker, voice, self.limits.text_chars)
        elif SynthesizeChunk.is_type(kind):
            await self._stream_chunk(parsed(SynthesizeChunk, event).text)
        elif SynthesizeStop.is_type(kind):
            await self._stream_stop()
        else:
            raise Refused(Outcome.INVALID_INPUT, f"unknown event type {kind[:64]!r}")

    def _voice(self, voice: SynthesizeVoice | None) -> str:
        return choose_voice(self.door.catalog.catalog, voice, self.gateway.settings.api.voices)

    def _start(self, fmt: AudioFormat) -> None:
        if self.recording is not None:
            self.recording.discard()
        self.recording = Recording(self.gateway.settings, fmt, self.limits.audio_seconds)

    async def _chunk(self, chunk: AudioChunk) -> None:
        if self.refused_audio:
            return
        if self.recording is None:  # no audio-start: the first chunk says the format
            self._start(AudioFormat.of(chunk))
        assert self.recording is not None
        try:
            self.recording.write(chunk)
        except Refused:
            self.recording.discard()
            self.recording = None
            self.refused_audio = True
            raise

    async def _stop(self) -> None:
        recording, self.recording = self.recording, None
        request, self.transcribe = self.transcribe, None
        if self.refused_audio:
            self.refused_audio = False
            return
        if recording is None:
            raise Refused(Outcome.EMPTY_AUDIO, "audio-stop without any audio")
        blob = await to_thread.run_sync(recording.finish)
        options = job_options(self.door.catalog.catalog.stt, request)
        wait = self.limits.wait
        capability = Capability.AUDIO_TRANSCRIBE
        handle = await jobs.submit(self.gateway, capability, blob.sha256, blob.path, options, wait)
        envelope = await jobs.finished(self.gateway, handle, wait)
        spoken = SpokenText.from_dict(jobs.output(envelope, handle.id))
        await self.write(Transcript(text=spoken.text, language=spoken.language or None).event())

    async def _stream_chunk(self, text: str) -> None:
        if self.streaming is None:
            raise Refused(Outcome.INVALID_INPUT, "synthesize-chunk before synthesize-start")
        await self.streaming.add(text)

    async def _stream_stop(self) -> None:
        if self.streaming is None:
            raise Refused(Outcome.INVALID_INPUT, "synthesize-stop before synthesize-start")
        stream, self.streaming = self.streaming, None
        await stream.finish()
        await self.write(SynthesizeStopped().event())
