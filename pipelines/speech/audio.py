"""Audio in and out: any common container -> mono float32 at one rate; WAV and Ogg/Opus out.

Decoding streams packet by packet through PyAV (FFmpeg) and its resampler, so memory is
bounded by what the caller keeps, never by what a header claims. Writers go to a temp file
next to the target and are renamed into place when complete.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self, cast

import av
import av.error
import numpy as np
from numpy.typing import NDArray

from pipelines.audio_headers import (
    CORRUPT,
    HEADER_BYTES,
    MAX_PACKET_BYTES,
    check_wav,
    rate_channels_problem,
)
from pipelines.errors import PermanentError
from pipelines.outcomes import Outcome
from pipelines.speech.config import DecodeLimits

Samples = NDArray[np.float32]

# Demuxers we accept. FFmpeg would also open playlists (hls, concat) that read other files.
ALLOWED_DEMUXERS = "wav,ogg,mp3,mov,mp4,m4a,3gp,flac,matroska,webm,aac"
OPUS_RATE = 48_000
_OPUS_FRAME = 960  # 20 ms at 48 kHz
_MAX_BAD_PACKETS = 8


class AudioError(PermanentError):
    """The audio input cannot be used; retrying will not change that."""


class AudioDecodeError(AudioError):
    """The bytes look like media but cannot be decoded (corrupt or truncated)."""

    outcome = Outcome.UNREADABLE_AUDIO


class NotAudioError(AudioError):
    """The input is not a media container, or has no audio stream."""

    outcome = Outcome.NOT_AUDIO


class EmptyAudioError(AudioError):
    """The input is zero bytes or decodes to zero samples."""

    outcome = Outcome.EMPTY_AUDIO


class AudioTooLargeError(AudioError):
    """The input file is larger than the byte limit."""

    outcome = Outcome.AUDIO_TOO_LARGE


class AudioTooLongError(AudioError):
    """The audio lasts longer than the duration limit."""

    outcome = Outcome.AUDIO_TOO_LONG


class AudioLimitError(AudioError):
    """A header or stream parameter is outside the decoding limits (refused before decoding)."""

    outcome = Outcome.UNREADABLE_AUDIO


class AudioDecodeTimeoutError(AudioError):
    """Decoding took longer than the wall-time bound (pathological input)."""

    outcome = Outcome.UNREADABLE_AUDIO


class AudioEncodeError(PermanentError):
    """Samples could not be encoded (empty, wrong shape, encoder failure)."""

    outcome = Outcome.ENGINE_FAILED


@dataclass(frozen=True, slots=True)
class DecodedAudio:
    samples: Samples
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


AudioSource = Path | bytes


def iter_audio(
    source: AudioSource,
    sample_rate: int,
    limits: DecodeLimits | None = None,
) -> Iterator[Samples]:
    """Yield mono float32 chunks at `sample_rate`, decoding one packet at a time.

    A header's duration is never trusted (streamed WAVs claim hours); samples are counted
    as they come and decoding stops with `AudioTooLongError` once past the limit.
    """
    limits = limits or DecodeLimits()
    max_samples = int(limits.max_seconds * sample_rate)
    deadline = time.monotonic() + limits.max_wall_s
    produced = 0
    with _open_input(source, limits) as container:
        if not container.streams.audio:
            raise NotAudioError(f"no audio stream in the {container.format.name} container")
        stream = container.streams.audio[0]
        _check_stream(stream.codec_context.channels, stream.sample_rate or 0)
        declared_s = _declared_seconds(container, stream)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        bad = 0
        for packet in _demux(container, stream):
            if time.monotonic() > deadline:
                raise AudioDecodeTimeoutError(
                    f"decoding took longer than the {limits.max_wall_s:g} s bound"
                )
            if packet.size > MAX_PACKET_BYTES:
                raise AudioLimitError(
                    f"audio refused: a {packet.size} byte packet, over {MAX_PACKET_BYTES}"
                )
            try:
                frames = packet.decode()
            except (av.error.FFmpegError, ValueError) as exc:
                # Isolated bad packets (a cut last packet) are tolerated; a run of them is not.
                bad += 1
                if bad > _MAX_BAD_PACKETS:
                    raise AudioDecodeError(f"audio data is corrupt: {_reason(exc)}") from exc
                continue
            for frame in frames:
                _check_stream(frame.layout.nb_channels, frame.sample_rate or 0)
                for chunk in _resample(resampler, frame):
                    produced += len(chunk)
                    if produced > max_samples:
                        raise AudioTooLongError(
                            f"audio is longer than the {limits.max_seconds:g} s limit"
                        )
                    yield chunk
        for chunk in _resample(resampler, None):
            produced += len(chunk)
            if produced > max_samples:
                raise AudioTooLongError(f"audio is longer than the {limits.max_seconds:g} s limit")
            yield chunk
    if produced == 0:
        if bad or declared_s > 0:
            raise AudioDecodeError("audio data is corrupt: nothing in it could be decoded")
        raise EmptyAudioError("audio decodes to zero samples")


def _check_stream(channels: int, rate: int) -> None:
    """Refuse declared channel counts and rates outside the limits (0 means not known yet:
    a truncated header is the decoder's to report)."""
    problem = rate_channels_problem(channels, rate) if channels and rate else None
    if problem:
        raise AudioLimitError(f"audio refused before decoding: {problem}")


def _declared_seconds(container: av.container.InputContainer, stream: av.AudioStream) -> float:
    """What the header claims; only used to word errors, never to size buffers."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000
    return 0.0


def decode_audio(
    source: AudioSource, sample_rate: int, limits: DecodeLimits | None = None
) -> DecodedAudio:
    """Decode everything into one array. Long inputs should go through `iter_audio`."""
    chunks = list(iter_audio(source, sample_rate, limits))
    return DecodedAudio(np.concatenate(chunks), sample_rate)


@contextlib.contextmanager
def _open_input(source: AudioSource, limits: DecodeLimits) -> Iterator[av.container.InputContainer]:
    if isinstance(source, bytes):
        size = len(source)
        fh: BinaryIO = io.BytesIO(source)  # shares the buffer: no second copy
    else:
        try:
            size = source.stat().st_size
            fh = source.open("rb")  # a file object, not a URL: no FFmpeg protocols involved
        except OSError as exc:
            raise NotAudioError(f"cannot read audio file {source}: {exc.strerror}") from exc
    with fh:
        if size == 0:
            raise EmptyAudioError("audio input is empty (0 bytes)")
        if size > limits.max_bytes:
            raise AudioTooLargeError(
                f"audio input is {size} bytes, over the {limits.max_bytes} byte limit"
            )
        head = fh.read(HEADER_BYTES)
        fh.seek(0)
        problem, seconds = check_wav(head, size)
        if problem and problem.startswith(CORRUPT):
            raise AudioDecodeError(f"audio data is {problem}")
        if problem:
            raise AudioLimitError(f"audio refused before decoding: {problem}")
        if seconds > limits.max_seconds:
            # From the bytes really present, never from the claimed data size.
            raise AudioTooLongError(f"audio is longer than the {limits.max_seconds:g} s limit")
        try:
            container = av.open(fh, "r", options={"format_whitelist": ALLOWED_DEMUXERS})
        except av.error.FFmpegError as exc:
            if not looks_like_audio(head):
                raise NotAudioError("input is not a supported audio container") from exc
            raise AudioDecodeError(f"audio data is corrupt or truncated: {_reason(exc)}") from exc
        with container:
            yield container


def looks_like_audio(head: bytes) -> bool:
    """Magic bytes of the containers we decode; tells corrupt audio from something else."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return True
    if head[:4] in (b"OggS", b"fLaC", b"\x1aE\xdf\xa3") or head[:3] == b"ID3":
        return True
    if head[4:8] == b"ftyp":
        return True
    # MPEG audio frame sync (mp3) or ADTS (aac): 11-12 set bits.
    return len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xE0) == 0xE0


def _demux(
    container: av.container.InputContainer, stream: av.AudioStream
) -> Iterator[av.Packet[av.AudioStream]]:
    try:
        yield from container.demux(stream)
    except av.error.FFmpegError as exc:
        raise AudioDecodeError(f"audio container is corrupt: {_reason(exc)}") from exc


def _resample(resampler: av.AudioResampler, frame: av.AudioFrame | None) -> Iterator[Samples]:
    try:
        out = resampler.resample(frame)
    except (av.error.FFmpegError, ValueError) as exc:
        raise AudioDecodeError(f"cannot resample audio: {_reason(exc)}") from exc
    for resampled in out:
        data = resampled.to_ndarray().reshape(-1)
        if data.size:
            yield np.array(data, dtype=np.float32)


def _reason(exc: Exception) -> str:
    """FFmpeg's own words ("Invalid data found when processing input"), without errno."""
    return str(getattr(exc, "strerror", None) or exc)


def _check_samples(samples: Samples) -> Samples:
    arr = np.asarray(samples, dtype=np.float32)
    if arr.ndim != 1:
        raise AudioEncodeError(f"expected mono samples (1-D), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise AudioEncodeError("samples contain NaN or infinity")
    return arr


def _to_pcm16(samples: Samples) -> bytes:
    clipped = np.clip(_check_samples(samples), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


class _AtomicTarget:
    """A temp file in the target's folder, renamed over the target on commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        self.tmp = Path(tmp)
        self.file: BinaryIO = os.fdopen(fd, "wb")

    def commit(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        self.tmp.replace(self.path)

    def abort(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


class WavWriter:
    """PCM16 mono WAV, written progressively and renamed into place on close."""

    def __init__(self, path: Path, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.frames = 0
        self._target = _AtomicTarget(path)
        self._wav = wave.open(self._target.file, "wb")  # noqa: SIM115 - closed in close()
        self._wav.setnchannels(1)
        self._wav.setsampwidth(2)
        self._wav.setframerate(sample_rate)

    def write(self, samples: Samples) -> None:
        data = _to_pcm16(samples)
        self._wav.writeframes(data)
        self.frames += len(data) // 2

    def close(self) -> None:
        if self.frames == 0:
            self.abort()
            raise AudioEncodeError("refusing to write an audio file with zero samples")
        self._wav.close()
        self._target.commit()

    def abort(self) -> None:
        self._wav.close()
        self._target.abort()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class PyAvWriter:
    """Mono audio through one FFmpeg encoder and muxer into an open binary stream; input at
    any rate is resampled once here."""

    def __init__(
        self,
        sink: BinaryIO,
        sample_rate: int,
        *,
        container: str,
        codec: str,
        rate: int | None = None,
        sample_format: str = "s16",
        codec_format: bool = True,  # False: leave the encoder's own sample format
        bitrate: int | None = None,
        container_options: dict[str, str] | None = None,
        codec_options: dict[str, str] | None = None,
        frame_size: int | None = None,
        name: str = "",
    ) -> None:
        self.sample_rate = sample_rate
        self.frames = 0
        self.name = name or codec
        rate = rate or sample_rate
        try:
            self._container = av.open(
                sink, "w", format=container, container_options=container_options or {}
            )
            self._stream = cast(
                av.AudioStream,
                self._container.add_stream(codec, rate=rate, options=codec_options or {}),
            )
            self._stream.layout = "mono"
            if codec_format:
                self._stream.format = sample_format
            if bitrate:
                self._stream.bit_rate = bitrate
            self._resampler = av.AudioResampler(
                format=sample_format,
                layout="mono",
                rate=rate,
                frame_size=frame_size or self._stream.codec_context.frame_size or None,
            )
        except (av.error.FFmpegError, ValueError) as exc:
            raise AudioEncodeError(f"cannot start the {self.name} encoder: {_reason(exc)}") from exc

    def write(self, samples: Samples) -> None:
        arr = _check_samples(samples)
        if arr.size == 0:
            return
        frame = av.AudioFrame.from_ndarray(arr.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = self.sample_rate
        self.frames += arr.size
        self._encode(self._resampler.resample(frame))

    def close(self) -> None:
        if self.frames == 0:
            self.abort()
            raise AudioEncodeError("refusing to write an audio file with zero samples")
        try:
            self._encode(self._resampler.resample(None))
            self._encode([None])
            self._container.close()
        except av.error.FFmpegError as exc:
            raise AudioEncodeError(f"{self.name} encoding failed: {_reason(exc)}") from exc

    def abort(self) -> None:
        with contextlib.suppress(av.error.FFmpegError):
            self._container.close()

    def _encode(self, frames: list[av.AudioFrame] | list[None]) -> None:
        for frame in frames:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class OggOpusWriter(PyAvWriter):
    """Mono 48 kHz Ogg/Opus (libopus, voip application): what messaging apps take as voice notes.

    `sink` is a path (temp + rename on close) or an open binary stream (pages are written as
    they fill, for streaming to a client).
    """

    def __init__(
        self,
        sink: Path | BinaryIO,
        sample_rate: int,
        bitrate: int = 24_000,
        page_duration_ms: int = 200,
    ) -> None:
        options = {"page_duration": str(page_duration_ms * 1000)}
        out: BinaryIO
        if isinstance(sink, Path):
            self._target: _AtomicTarget | None = _AtomicTarget(sink)
            out = self._target.file
        else:
            self._target, out = None, sink
            options["flush_packets"] = "1"  # hand each finished page to the stream at once
        try:
            super().__init__(
                out,
                sample_rate,
                container="ogg",
                codec="libopus",
                rate=OPUS_RATE,
                sample_format="flt",
                codec_format=False,
                bitrate=bitrate,
                container_options=options,
                codec_options={"application": "voip", "vbr": "on", "frame_duration": "20"},
                frame_size=_OPUS_FRAME,
                name="Opus",
            )
        except AudioEncodeError:
            self._abort_target()
            raise

    def close(self) -> None:
        try:
            super().close()
        except AudioEncodeError:
            self._abort_target()
            raise
        if self._target:
            self._target.commit()

    def abort(self) -> None:
        super().abort()
        self._abort_target()

    def _abort_target(self) -> None:
        if self._target:
            self._target.abort()


def write_wav(path: Path, samples: Samples, sample_rate: int) -> Path:
    with WavWriter(path, sample_rate) as writer:
        writer.write(samples)
    return path


def write_ogg_opus(path: Path, samples: Samples, sample_rate: int, bitrate: int = 24_000) -> Path:
    with OggOpusWriter(path, sample_rate, bitrate=bitrate) as writer:
        writer.write(samples)
    return path
