"""`describe` -> `info`: the ASR model and the TTS voices the workers announce
(`workers.core.catalog`), each marked installed, as Home Assistant reads them.

Home Assistant asks with a one-second timeout, so the door answers from a catalog it keeps
(`CatalogCache`, refreshed in a thread every few seconds), never from Redis on the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from anyio import to_thread
from wyoming.info import AsrModel, AsrProgram, Attribution, Info, TtsProgram, TtsVoice

from workers import version
from workers.core.catalog import Catalog
from workers.core.gateway import JobGateway

log = logging.getLogger(__name__)

REFRESH_SECONDS = 2.0
ATTRIBUTION = Attribution(name="mcp-media", url="")  # no address of its own to name
PROGRAM = "mcp-media"
# Whisper's languages (a multilingual model takes each; an English-only one, `en` alone).
WHISPER_LANGUAGES = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
)  # fmt: skip


def wyoming_language(tag: str) -> str:
    """A voice's language as Wyoming voice servers write it: `en_US` for `en-us`."""
    base, _, region = tag.replace("_", "-").partition("-")
    return f"{base.lower()}_{region.upper()}" if region else base.lower()


def info_of(found: Catalog, transcript_streaming: bool, synthesize_streaming: bool) -> Info:
    """What the serving workers offer, as Wyoming's `info`: nothing for a capability no live
    worker serves (Home Assistant then offers none)."""
    current = version.current()
    asr = []
    if found.stt is not None:
        model = found.stt
        model_info = AsrModel(
            name=model.id,
            attribution=ATTRIBUTION,
            installed=True,
            description=f"{model.id} ({model.engine or 'whisper'})",
            version=current,
            languages=list(WHISPER_LANGUAGES) if model.multilingual else ["en"],
        )
        asr.append(
            AsrProgram(
                name=PROGRAM,
                attribution=ATTRIBUTION,
                installed=True,
                description="mcp-media speech to text",
                version=current,
                models=[model_info],
                supports_transcript_streaming=transcript_streaming,
            )
        )
    tts = []
    if found.voices:
        voices = [
            TtsVoice(
                name=voice.id,
                attribution=ATTRIBUTION,
                installed=True,
                description=f"{voice.id} ({voice.model})",
                version=current,
                languages=[wyoming_language(voice.language)] if voice.language else [],
            )
            for voice in found.named().values()
        ]
        tts.append(
            TtsProgram(
                name=PROGRAM,
                attribution=ATTRIBUTION,
                installed=True,
                description="mcp-media text to speech",
                version=current,
                voices=voices,
                supports_synthesize_streaming=synthesize_streaming,
            )
        )
    return Info(asr=asr, tts=tts)


class CatalogCache:
    """The workers' catalog as last read, refreshed in a thread every `REFRESH_SECONDS`."""

    def __init__(self, gateway: JobGateway) -> None:
        self.gateway = gateway
        self.catalog = Catalog()
        self.read_at = 0.0
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> Catalog:
        try:
            self.catalog = await to_thread.run_sync(self.gateway.catalog)
            self.read_at = time.monotonic()
        except Exception as exc:  # the broker away: keep what was last read
            log.warning("cannot read what the workers serve: %s", exc)
        return self.catalog

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            await self.refresh()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
