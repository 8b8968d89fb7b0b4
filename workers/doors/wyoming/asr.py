"""Speech to text over Wyoming: `transcribe` (model and language), then `audio-start`,
`audio-chunk`s and `audio-stop` at whatever rate, width and channels the client records.

The audio is written as it arrives into a WAV file under the cache (never held in memory),
in the client's own format: the STT job decodes and resamples any WAV, as it does an upload
to `/v1/audio/transcriptions`. Its length is bounded (`Limits.audio_seconds`). At
`audio-stop` the file goes into the audio cache by its content hash and one STT job runs
through the job gateway; its transcript is the answer.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import wave
from dataclasses import dataclass
from pathlib import Path

from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart

from pipelines.media import BlobError, MarkerReason, MediaKind, StoredBlob
from pipelines.outcomes import Outcome
from pipelines.results import private_folders
from pipelines.speech.chinese_script import split_language
from workers.core.catalog import SttModel
from workers.core.settings import Settings
from workers.doors.wyoming.outcomes import Refused

MAX_RATE = 192_000
MAX_CHANNELS = 8
# Wyoming's 8-bit samples are signed; WAV's are unsigned (offset by 128).
_SIGNED_TO_UNSIGNED = bytes((b + 128) % 256 for b in range(256))


@dataclass(frozen=True, slots=True)
class AudioFormat:
    rate: int
    width: int
    channels: int

    @classmethod
    def of(cls, event: AudioStart | AudioChunk) -> AudioFormat:
        found = cls(event.rate, event.width, event.channels)
        if not (
            isinstance(found.rate, int) and 1000 <= found.rate <= MAX_RATE
            and isinstance(found.width, int) and 1 <= found.width <= 4
            and isinstance(found.channels, int) and 1 <= found.channels <= MAX_CHANNELS
        ):  # fmt: skip
            raise Refused(
                Outcome.INVALID_INPUT,
                f"audio format rate={event.rate} width={event.width} channels={event.channels}"
                f" is not served: rate 1000-{MAX_RATE}, width 1-4, channels 1-{MAX_CHANNELS}",
            )
        return found

    @property
    def bytes_per_second(self) -> int:
        return self.rate * self.width * self.channels


def job_options(model: SttModel | None, request: Transcribe | None) -> dict[str, str]:
    """The STT job's options from a `transcribe` event, checked against the served model: a
    language it cannot take, or a model it is not, is refused before any audio is spent."""
    options = {"task": "transcribe"}
    if model is None or request is None:
        return options
    if request.name and request.name != model.id:
        raise Refused(
            Outcome.UNSUPPORTED, f"model {request.name!r} is not served here: {model.id} is"
        )
    tag = (request.language or "").strip().lower().replace("_", "-")
    if tag:
        base, script = split_language(tag)
        if not model.takes(base):
            raise Refused(
                Outcome.UNSUPPORTED,
                f"{model.id} is an English-only model: language {request.language!r} is not"
                " available",
            )
        options["language"] = tag if script is not None else base  # en-US and en: one key
    return options


class Recording:
    """One utterance's audio, written into a WAV file under the cache as it arrives."""

    def __init__(self, settings: Settings, fmt: AudioFormat, max_seconds: float) -> None:
        self.settings = settings
        self.format = fmt
        self.limit = int(max_seconds * fmt.bytes_per_second)
        self.max_seconds = max_seconds
        # Disk too: seconds at 192 kHz, 32-bit, 8 channels would be gigabytes.
        self.max_bytes = settings.max_blob_bytes
        self.size = 0
        folder = settings.cache_root / "uploads"
        private_folders(settings.home, folder)
        self.path = folder / f".wyoming-{secrets.token_hex(8)}.wav"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self.file = os.fdopen(fd, "wb")
        # wave closes no file it was handed: `_close` closes both
        self.wav = wave.open(self.file, "wb")  # noqa: SIM115
        self.wav.setframerate(fmt.rate)
        self.wav.setsampwidth(fmt.width)
        self.wav.setnchannels(fmt.channels)

    def write(self, chunk: AudioChunk) -> None:
        if AudioFormat.of(chunk) != self.format:
            raise Refused(
                Outcome.INVALID_INPUT,
                "an audio-chunk's format differs from its audio-start's: send one format",
            )
        audio = chunk.audio
        self.size += len(audio)
        if self.size > self.limit:
            raise Refused(
                Outcome.AUDIO_TOO_LONG,
                f"the audio is over this server's {self.max_seconds:g} s",
            )
        if self.size > self.max_bytes:
            raise Refused(
                Outcome.AUDIO_TOO_LARGE,
                f"the audio is over {self.max_bytes} bytes (MCP_MEDIA_MAX_BLOB_BYTES)",
            )
        frame = self.format.width * self.format.channels
        if len(audio) % frame:
            raise Refused(Outcome.INVALID_INPUT, "an audio-chunk holds a partial sample")
        if self.format.width == 1:
            audio = audio.translate(_SIGNED_TO_UNSIGNED)
        self.wav.writeframesraw(audio)

    def finish(self) -> StoredBlob:
        """The recording in the audio cache (a thread's work: it hashes and syncs)."""
        try:
            self._close()
            if self.size == 0:
                raise Refused(Outcome.EMPTY_AUDIO, "no audio arrived before audio-stop")
            return self.settings.media_cache().store_file(self.path, MediaKind.AUDIO)
        except BlobError as exc:
            outcome = {
                MarkerReason.NOT_AUDIO: Outcome.NOT_AUDIO,
                MarkerReason.TOO_LARGE: Outcome.AUDIO_TOO_LARGE,
            }.get(exc.reason)
            if outcome is None:
                raise
            raise Refused(outcome, exc.message) from exc
        finally:
            self.discard()

    def _close(self) -> None:
        try:
            self.wav.close()
        finally:
            self.file.close()

    def discard(self) -> None:
        with contextlib.suppress(OSError, wave.Error):
            self._close()
        Path(self.path).unlink(missing_ok=True)
