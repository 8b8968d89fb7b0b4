"""Speech out in the formats clients ask for: mp3, aac, flac, wav, raw pcm (PyAV encoders)
and Ogg/Opus (`audio.OggOpusWriter`), written progressively to a file or a stream.

`TeeSink` hands out the bytes a muxer appends while it writes, so a caller can stream them
(sentence by sentence) and still end with the complete file: header patches a muxer writes
back at close (WAV and FLAC sizes) reach only the file, the streamed copy keeps the
provisional header, as any streamed WAV or FLAC does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Protocol, Self

from pipelines.speech.audio import (
    AudioEncodeError,
    OggOpusWriter,
    PyAvWriter,
    Samples,
    _AtomicTarget,
)


@dataclass(frozen=True, slots=True)
class OutFormat:
    name: str
    ext: str
    mime: str
    container: str = ""
    codec: str = ""
    rate: int | None = None  # None: the voice's own rate
    sample_format: str = "s16"
    bitrate: int | None = None


# `ogg` is Ogg/Opus (what OpenAI calls `opus`); `pcm` is OpenAI's: 24 kHz s16le mono, no header.
FORMATS: dict[str, OutFormat] = {
    f.name: f
    for f in (
        OutFormat("ogg", ".ogg", "audio/ogg"),
        OutFormat("wav", ".wav", "audio/wav", "wav", "pcm_s16le"),
        OutFormat("mp3", ".mp3", "audio/mpeg", "mp3", "libmp3lame", None, "s16p", 64_000),
        OutFormat("aac", ".aac", "audio/aac", "adts", "aac", None, "fltp", 64_000),
        OutFormat("flac", ".flac", "audio/flac", "flac", "flac", None, "s16"),
        OutFormat("pcm", ".pcm", "audio/pcm", "s16le", "pcm_s16le", 24_000, "s16"),
    )
}


class AudioWriter(Protocol):
    frames: int

    def write(self, samples: Samples) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


class TeeSink(io.RawIOBase):
    """A seekable file that also keeps, for `drain`, every byte appended past its end."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._streamed = 0  # bytes handed out so far (the file's length as streamed)
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        pos = self._file.tell()
        written = self._file.write(data)
        end = pos + written
        reached = self._streamed + len(self._pending)
        if end > reached:  # only what extends the stream; back-patches stay in the file
            self._pending += bytes(data)[max(0, reached - pos) :]
        return written

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        self._file.flush()

    def drain(self) -> bytes:
        out = bytes(self._pending)
        self._streamed += len(out)
        self._pending.clear()
        return out


class SpeechFile:
    """One speech file written progressively; `drain()` gives the bytes added since the last
    call (for streaming), the file is renamed into place on a clean exit."""

    def __init__(self, path: Path, sample_rate: int, fmt: str) -> None:
        if fmt not in FORMATS:
            raise AudioEncodeError(f"unknown audio format {fmt!r}: use {', '.join(FORMATS)}")
        self._target = _AtomicTarget(path)
        self._sink = TeeSink(self._target.file)
        stream: BinaryIO = self._sink  # type: ignore[assignment]
        try:
            self.writer: AudioWriter = (
                OggOpusWriter(stream, sample_rate)
                if fmt == "ogg"
                else PyAvWriter(
                    stream,
                    sample_rate,
                    container=FORMATS[fmt].container,
                    codec=FORMATS[fmt].codec,
                    rate=FORMATS[fmt].rate,
                    sample_format=FORMATS[fmt].sample_format,
                    bitrate=FORMATS[fmt].bitrate,
                    container_options={"flush_packets": "1"},
                    name=fmt,
                )
            )
        except BaseException:
            self._target.abort()
            raise

    @property
    def frames(self) -> int:
        return self.writer.frames

    def write(self, samples: Samples) -> None:
        self.writer.write(samples)

    def drain(self) -> bytes:
        return self._sink.drain()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.writer.abort()
            self._target.abort()
            return
        try:
            self.writer.close()
        except BaseException:
            self._target.abort()
            raise
        self._target.commit()
