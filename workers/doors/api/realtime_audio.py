"""The audio a Realtime session takes: PCM16, or G.711 (mu-law `audio/pcmu`, A-law
`audio/pcma`, 8 kHz, telephony's), decoded here to PCM16 by ITU-T G.711's tables, so that
every turn's buffer is PCM16 at the session's rate."""

from __future__ import annotations

import sys
from array import array
from enum import StrEnum


class Codec(StrEnum):
    PCM16 = "audio/pcm"
    PCMU = "audio/pcmu"
    PCMA = "audio/pcma"


# The older session shape's names of the same formats.
OLDER_NAMES = {"pcm16": Codec.PCM16, "g711_ulaw": Codec.PCMU, "g711_alaw": Codec.PCMA}
G711_RATE = 8_000


def _mu_law(byte: int) -> int:
    byte = ~byte & 0xFF
    exponent, mantissa = (byte >> 4) & 0x07, byte & 0x0F
    sample = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return -sample if byte & 0x80 else sample


def _a_law(byte: int) -> int:
    byte ^= 0x55
    exponent, mantissa = (byte >> 4) & 0x07, byte & 0x0F
    sample = (mantissa << 4) + 8 if exponent == 0 else ((mantissa << 4) + 0x108) << (exponent - 1)
    return sample if byte & 0x80 else -sample


_TABLES = {
    Codec.PCMU: [_mu_law(byte) for byte in range(256)],
    Codec.PCMA: [_a_law(byte) for byte in range(256)],
}


def to_pcm16(codec: Codec, data: bytes) -> bytes:
    """`data` as 16-bit little-endian PCM (PCM16 is returned as it came)."""
    if codec is Codec.PCM16:
        return data
    table = _TABLES[codec]
    samples = array("h", (table[byte] for byte in data))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def decoded_size(codec: Codec, size: int) -> int:
    """Bytes of PCM16 that `size` bytes of `codec` become."""
    return size if codec is Codec.PCM16 else size * 2
