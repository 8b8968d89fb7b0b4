"""Test audio built in memory with PyAV's encoders, in every container the decoder accepts."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import av
import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    format: str
    codec: str
    rate: int
    layout: str = "mono"
    options: tuple[tuple[str, str], ...] = ()


# FFmpeg's native Vorbis encoder is experimental and stereo-only; there is no libvorbis here.
CONTAINERS: dict[str, Container] = {
    c.name: c
    for c in (
        Container("wav", "wav", "pcm_s16le", 44_100),
        Container("ogg-opus", "ogg", "libopus", 48_000),
        Container("ogg-vorbis", "ogg", "vorbis", 44_100, "stereo", (("strict", "experimental"),)),
        Container("mp3", "mp3", "libmp3lame", 44_100, "stereo"),
        Container("m4a-aac", "ipod", "aac", 44_100),
        Container("adts-aac", "adts", "aac", 22_050),
        Container("flac", "flac", "flac", 16_000),
        Container("webm-opus", "webm", "libopus", 48_000, "stereo"),
    )
}


def tone(seconds: float, rate: int = 16_000, freq: float = 440.0) -> NDArray[np.float32]:
    """A sine with a slow amplitude wobble, so resampling errors show up as errors."""
    t = np.arange(int(seconds * rate)) / rate
    envelope = 0.25 + 0.1 * np.sin(2 * np.pi * 0.5 * t)
    return (envelope * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def encode(samples: NDArray[np.float32], rate: int, container: str) -> bytes:
    """Encode mono float32 `samples` at `rate` into `container` (a key of CONTAINERS)."""
    spec = CONTAINERS[container]
    buf = io.BytesIO()
    with av.open(buf, "w", format=spec.format) as out:
        stream = out.add_stream(spec.codec, rate=spec.rate, options=dict(spec.options))
        assert isinstance(stream, av.AudioStream)
        stream.layout = spec.layout
        target = stream.format.name
        resampler = av.AudioResampler(
            format=target,
            layout=spec.layout,
            rate=spec.rate,
            frame_size=stream.codec_context.frame_size or 1024,
        )
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = rate
        for piece in [*resampler.resample(frame), *resampler.resample(None), None]:
            for packet in stream.encode(piece):
                out.mux(packet)
    return buf.getvalue()


def wav_claiming(seconds: float, actual_seconds: float, rate: int = 16_000) -> bytes:
    """A PCM16 WAV whose header claims `seconds` but that holds `actual_seconds` of audio."""
    data = (tone(actual_seconds, rate) * 32767).astype("<i2").tobytes()
    claimed = int(seconds * rate) * 2
    claimed = min(claimed, 0xFFFFFFFF - 36)
    header = b"RIFF" + struct.pack("<I", 36 + claimed) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    header += b"data" + struct.pack("<I", claimed)
    return header + data


def flac_claiming(seconds: float, actual_seconds: float, rate: int = 16_000) -> bytes:
    """A FLAC whose STREAMINFO claims `seconds` of audio (FFmpeg reports that duration)."""
    data = bytearray(encode(tone(actual_seconds, rate), rate, "flac"))
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO comes first
    (packed,) = struct.unpack(">Q", data[18:26])  # rate:20 channels:3 bps:5 total:36
    packed = (packed & ~((1 << 36) - 1)) | int(seconds * rate)
    data[18:26] = struct.pack(">Q", packed)
    return bytes(data)


def silent_wav(seconds: float, rate: int = 16_000) -> bytes:
    return wav_claiming(seconds, 0, rate)[:44] + b"\0" * int(seconds * rate) * 2


def corrupt(data: bytes, keep_header: int = 64, seed: int = 7) -> bytes:
    """Keep the first bytes (so the container is recognised) and scramble the rest."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, size=len(data) - keep_header, dtype=np.uint8).tobytes()
    return data[:keep_header] + noise
