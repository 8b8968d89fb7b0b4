"""The bounds of every Wyoming connection: Wyoming has no authentication of its own, so a
client may be anyone who can reach the port, and nothing it sends may grow without limit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    connections: int = 16  # open at once; past it a new connection is answered and closed
    idle_seconds: float = 60.0  # between two events (and for each part of one to arrive)
    header_bytes: int = 64 * 1024  # an event's JSON line
    data_bytes: int = 256 * 1024  # an event's extra JSON (`data_length`)
    payload_bytes: int = 1024 * 1024  # an event's binary payload (one audio chunk)
    audio_seconds: float = 120.0  # of one transcription's audio
    text_chars: int = 20_000  # of one synthesis (a streamed one: all its chunks)
    wait: float = 300.0  # seconds a request waits for its job
