"""G.711 as a Realtime session takes it: the decoding tables against an encoder written from
the standard's formulas (mu-law) and the standard's own code points (A-law)."""

from __future__ import annotations

import numpy as np
import pytest

from workers.doors.api.realtime_audio import Codec, decoded_size, to_pcm16

pytestmark = pytest.mark.unit


def mu_law(samples: np.ndarray) -> bytes:
    """G.711 mu-law encoding (the bias-and-segment form of the standard)."""
    x = np.clip(samples.astype(np.int32), -32635, 32635)
    sign = (x < 0).astype(np.int32) << 7
    magnitude = np.abs(x) + 0x84
    exponent = np.clip(np.floor(np.log2(magnitude)).astype(np.int32) - 7, 0, 7)
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    encoded: bytes = (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()
    return encoded


def test_mu_law_round_trips_within_its_step() -> None:
    ramp = np.linspace(-30000, 30000, 4001)
    decoded = np.frombuffer(to_pcm16(Codec.PCMU, mu_law(ramp)), "<i2")
    # each code covers a step that grows with the magnitude: 1/16 of its segment
    assert np.all(np.abs(decoded - ramp) <= np.maximum(np.abs(ramp) / 16, 8) + 1)
    assert to_pcm16(Codec.PCMU, b"\xff\x7f") == b"\x00\x00\x00\x00"  # the two zeros


def test_a_law_code_points() -> None:
    # 0xD5 and 0x55 are A-law's smallest positive and negative steps (+8, -8), 0xAA and
    # 0x2A the largest (+32256, -32256)
    decoded = np.frombuffer(to_pcm16(Codec.PCMA, bytes([0xD5, 0x55, 0xAA, 0x2A])), "<i2")
    assert decoded.tolist() == [8, -8, 32256, -32256]


def test_pcm16_passes_and_sizes() -> None:
    assert to_pcm16(Codec.PCM16, b"\x01\x02") == b"\x01\x02"
    assert decoded_size(Codec.PCMU, 10) == 20 and decoded_size(Codec.PCM16, 10) == 10
