"""Text to speech over Wyoming: `synthesize` (voice by name, or by language) answered with
`audio-start`, `audio-chunk`s and `audio-stop`, relayed as the worker speaks each sentence
(one TTS job in raw PCM, streamed through the job's chunk stream); and the streaming form,
`synthesize-start`, `synthesize-chunk`s, `synthesize-stop`, voiced sentence by sentence as
the text arrives, then `synthesize-stopped`. The `synthesize` a streaming client also sends
for older servers is not voiced a second time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

from anyio import to_thread
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from pipelines.media import Capability
from pipelines.outcomes import Outcome
from workers.core import keys
from workers.core.catalog import Catalog, VoiceNotFound
from workers.core.gateway import JobGateway, JobHandle
from workers.core.stage_configs import store_request, synthesis_request
from workers.doors.wyoming import jobs
from workers.doors.wyoming.limits import Limits
from workers.doors.wyoming.outcomes import Refused, door_failure, error_event

# The job's `pcm` format: 24 kHz, 16-bit, mono, no header (OpenAI's).
RATE, WIDTH, CHANNELS = 24_000, 2, 1
CHUNK_BYTES = 2048 * WIDTH  # one audio-chunk (about 85 ms)
FILE_READ = 64 * 1024
# The end of a sentence in streamed text: its mark, then a space (or a CJK mark alone).
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])")

Write = Callable[[Event], Awaitable[None]]


def choose_voice(found: Catalog, voice: SynthesizeVoice | None, mapped: dict[str, str]) -> str:
    """The voice a request names (a served voice, an OpenAI name, a blend), else the
    configured voice when it speaks the language asked for, else one that does."""
    if voice is not None and voice.name:
        try:
            return found.resolve_voice(voice.name, None, mapped)
        except VoiceNotFound as exc:
            raise Refused(Outcome.UNSUPPORTED, str(exc)) from None
    if voice is not None and voice.language:
        language = voice.language.replace("_", "-").split("-")[0].lower()
        chosen = found.default_voice(language)
        spoken = found.named().get(chosen)
        if spoken is not None and spoken.language.split("-")[0] != language:
            raise Refused(Outcome.UNSUPPORTED, f"no served voice speaks {voice.language!r}")
        return chosen
    return found.default_voice()


class Speaker:
    """Speaks texts for one connection, each as one TTS job through the gateway."""

    def __init__(self, gateway: JobGateway, limits: Limits, write: Write) -> None:
        self.gateway = gateway
        self.settings = gateway.settings
        self.limits = limits
        self.write = write

    def check(self, text: str) -> None:
        if not text.strip():
            raise Refused(Outcome.EMPTY_TEXT, "there is no text to speak")
        if len(text) > self.limits.text_chars:
            raise Refused(
                Outcome.TEXT_TOO_LONG,
                f"the text is {len(text)} characters, over this server's {self.limits.text_chars}",
            )

    async def speak(self, text: str, voice: str) -> None:
        """audio-start, the audio as the worker hands it over, audio-stop."""
        await self.play(await self.submit(text, voice))

    async def submit(self, text: str, voice: str) -> JobHandle:
        """The text's TTS job (raw PCM, streamed), through the gateway."""
        self.check(text)
        params = synthesis_request(text, self.settings, fmt="pcm", voice=voice)
        blob = await to_thread.run_sync(store_request, self.settings, params)
        capability = Capability.AUDIO_SYNTHESIZE
        key = await to_thread.run_sync(self.gateway.key, capability, blob.sha256)
        stream = {"stream": keys.chunks(key)}
        wait = self.limits.wait
        return await jobs.submit(self.gateway, capability, blob.sha256, blob.path, stream, wait)

    async def play(self, handle: JobHandle) -> None:
        """The job's audio as its worker hands it over (or its file, when it streamed none)."""
        wait = self.limits.wait
        started = False
        if handle.envelope is None:
            async for data in jobs.relay(self.gateway, handle, wait):
                if not started:
                    await self.write(AudioStart(RATE, WIDTH, CHANNELS).event())
                    started = True
                await self._chunks(data)
        if not started:  # a stored result, or a job that streamed nothing: its file
            envelope = await jobs.finished(self.gateway, handle, wait)
            path = str(jobs.output(envelope, handle.id)["path"])
            await self.write(AudioStart(RATE, WIDTH, CHANNELS).event())
            pcm = await to_thread.run_sync(open, path, "rb")
            try:
                while data := await to_thread.run_sync(pcm.read, FILE_READ):
                    await self._chunks(data)
            finally:
                pcm.close()
        await self.write(AudioStop().event())

    async def _chunks(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK_BYTES):
            piece = data[start : start + CHUNK_BYTES]
            await self.write(AudioChunk(RATE, WIDTH, CHANNELS, piece).event())


class SentenceStream:
    """Text arriving in pieces, handed out a whole sentence at a time."""

    def __init__(self, limit: int) -> None:
        self.pending = ""
        self.total = 0
        self.limit = limit

    def add(self, text: str) -> list[str]:
        self.total += len(text)
        if self.total > self.limit:
            raise Refused(
                Outcome.TEXT_TOO_LONG, f"the streamed text is over this server's {self.limit}"
                " characters",
            )  # fmt: skip
        self.pending += text
        parts = _SENTENCE_END.split(self.pending)
        self.pending = parts.pop()
        return [part.strip() for part in parts if part.strip()]

    def rest(self) -> str:
        rest, self.pending = self.pending.strip(), ""
        return rest


class SpokenStream:
    """A streamed synthesis: each sentence's job is submitted as soon as the sentence is
    complete, and the jobs' audio is played in order by one task, so the next sentence is
    being spoken while this one is heard and the connection keeps reading events."""

    def __init__(self, speaker: Speaker, voice: str, limit: int) -> None:
        self.speaker = speaker
        self.voice = voice
        self.sentences = SentenceStream(limit)
        self.queue: asyncio.Queue[JobHandle | None] = asyncio.Queue()
        self.player = asyncio.get_running_loop().create_task(self._play())

    async def add(self, text: str) -> None:
        for sentence in self.sentences.add(text):
            await self.queue.put(await self.speaker.submit(sentence, self.voice))

    async def finish(self) -> None:
        """The rest of the text spoken, then every queued sentence heard."""
        try:
            rest = self.sentences.rest()
            if rest:
                await self.queue.put(await self.speaker.submit(rest, self.voice))
        finally:
            await self.queue.put(None)
            await self.player

    def cancel(self) -> None:
        self.player.cancel()

    async def _play(self) -> None:
        while (handle := await self.queue.get()) is not None:
            try:
                await self.speaker.play(handle)
            except Refused as exc:  # this sentence's: the others are still spoken
                await self.speaker.write(error_event(exc.failure))
            except (ConnectionError, asyncio.CancelledError):
                raise
            except Exception as exc:  # the broker, the disk: said once, the rest unspoken
                await self.speaker.write(error_event(door_failure(exc, self.speaker.gateway)))
                return
