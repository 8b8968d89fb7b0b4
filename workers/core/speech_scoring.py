"""The doors' port to a voice activity model: speech probabilities of a live stream, window by
window, so that a door can end turns where someone stops speaking (the Realtime socket's
server VAD) without loading the model's libraries itself. The command line builds it from the
silero engine and hands it to the door; None when no VAD model is prepared."""

from __future__ import annotations

from typing import Protocol


class SpeechScores(Protocol):
    """One stream's scorer: its state carried from one `feed` to the next."""

    @property
    def window_s(self) -> float:
        """Seconds of audio each probability stands for."""
        ...

    def feed(self, pcm16: bytes) -> list[float]:
        """Take 16-bit little-endian mono PCM at the stream's rate; the probabilities of the
        windows completed by it, in order (audio short of a window waits for the next feed)."""
        ...


class SpeechScoring(Protocol):
    def open(self, rate: int) -> SpeechScores:
        """A scorer for a new stream of PCM16 at `rate` Hz."""
        ...
