"""Audio limits checked before any decoder runs: channels, sample rate, block align, duration.

`wav_problem` reads a RIFF/WAVE header in pure Python; `stream_problem` checks what FFmpeg
reports for any container once it is opened, before the first packet is decoded. Both
return a sentence naming the limit, or None.
"""

from __future__ import annotations

import struct

MAX_CHANNELS = 8
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 192_000
# PCM blocks are channels x bytes a sample; compressed WAV codecs (ADPCM, GSM) use blocks
# of a few KiB at most.
MAX_BLOCK_ALIGN = 8_192
MAX_PACKET_BYTES = 4 * 1024 * 1024
HEADER_BYTES = 4096
_PCM_TAGS = frozenset({1, 3, 6, 7})  # PCM, IEEE float, A-law, mu-law
_EXTENSIBLE = 0xFFFE


def rate_channels_problem(channels: int, rate: int) -> str | None:
    if not 1 <= channels <= MAX_CHANNELS:
        return f"{channels} channels, outside 1-{MAX_CHANNELS}"
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        return f"sample rate {rate} Hz, outside {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz"
    return None


CORRUPT = "corrupt: "  # the prefix of structural problems: the decoder's to report


def wav_problem(head: bytes, file_size: int) -> str | None:
    """What is over the limits in a WAV header (first HEADER_BYTES bytes), or None.
    Structural damage (no fmt chunk, a cut header) is not a limit: None."""
    problem = check_wav(head, file_size)[0]
    return None if problem is None or problem.startswith(CORRUPT) else problem


def wav_seconds(head: bytes, file_size: int) -> float:
    """PCM seconds really present (the claimed data size is not trusted: streamed WAVs
    claim hours); 0.0 when unknown (compressed codecs, no header)."""
    return check_wav(head, file_size)[1]


def check_wav(head: bytes, file_size: int) -> tuple[str | None, float]:
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None, 0.0
    pos = 12
    fmt: tuple[int, int, int, int, int, int] | None = None
    while pos + 8 <= len(head):
        kind = head[pos : pos + 4]
        (length,) = struct.unpack_from("<I", head, pos + 4)
        body = pos + 8
        if kind == b"fmt ":
            if length < 16 or body + 16 > len(head):
                return CORRUPT + "wav fmt chunk is truncated", 0.0
            fmt = struct.unpack_from("<HHIIHH", head, body)
        elif kind == b"data":
            if fmt is None:
                return CORRUPT + "wav data comes before its fmt chunk", 0.0
            return _fmt_problem(fmt, file_size - body)
        pos = body + length + (length & 1)
    if fmt is None:
        return CORRUPT + "wav has no fmt chunk in its first 4 KiB", 0.0
    return None, 0.0


def _fmt_problem(
    fmt: tuple[int, int, int, int, int, int], data_bytes: int
) -> tuple[str | None, float]:
    tag, channels, rate, _, block_align, bits = fmt
    found = rate_channels_problem(channels, rate)
    if found:
        return f"wav declares {found}", 0.0
    if block_align <= 0 or block_align > MAX_BLOCK_ALIGN:
        return f"wav block align {block_align} bytes, outside 1-{MAX_BLOCK_ALIGN}", 0.0
    if tag in _PCM_TAGS or tag == _EXTENSIBLE:
        if bits not in (8, 16, 24, 32, 64) or block_align != channels * bits // 8:
            what = f"{channels} channels of {bits} bits"
            return f"wav block align {block_align} does not match {what}", 0.0
        return None, max(0, data_bytes) / block_align / rate
    return None, 0.0
