"""Server VAD for a Realtime session: the speech probabilities of each append (the VAD model
behind the `SpeechScoring` port, window by window as the audio arrives) turned into the
turn's edges with OpenAI's `server_vad` settings.

Speech starts on the first window at or above `threshold`, and its turn begins
`prefix_padding_ms` before that window (never before the session's first sample); it stops
once the probability has stayed under `threshold - 0.15` (silero's hysteresis) for
`silence_duration_ms`, and the turn ends there, its trailing silence included, as OpenAI's
`audio_end_ms` does. Times are milliseconds since the session's first sample. A turn that
reaches its bound is `cut` by the session: the next one starts at once unless quiet had begun.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from anyio import to_thread

from workers.core.speech_scoring import SpeechScores
from workers.doors.api.realtime_events import ServerVad

HYSTERESIS = 0.15


class EdgeKind(StrEnum):
    STARTED = "started"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Edge:
    kind: EdgeKind
    at_ms: int  # started: where the turn begins (its padding in); stopped: where it ends


class TurnWatch:
    """The edges in a stream of window probabilities (plain arithmetic, no model)."""

    def __init__(self, vad: ServerVad, window_s: float) -> None:
        self.vad = vad
        self.window_ms = window_s * 1000
        self.windows = 0  # windows scored so far
        self.speaking = False
        self.silent_from: int | None = None  # the window where quiet began, while speaking

    def scores(self, probabilities: list[float]) -> list[Edge]:
        edges = []
        for prob in probabilities:
            edge = self._step(prob)
            if edge is not None:
                edges.append(edge)
            self.windows += 1
        return edges

    def _step(self, prob: float) -> Edge | None:
        at = self.windows
        if not self.speaking:
            if prob < self.vad.threshold:
                return None
            self.speaking, self.silent_from = True, None
            start = max(0.0, at * self.window_ms - self.vad.prefix_padding_ms)
            return Edge(EdgeKind.STARTED, round(start))
        if prob >= self.vad.threshold:
            self.silent_from = None
        elif prob < self.vad.threshold - HYSTERESIS and self.silent_from is None:
            self.silent_from = at
        if self.silent_from is None:
            return None
        end = (at + 1) * self.window_ms
        if end - self.silent_from * self.window_ms < self.vad.silence_duration_ms:
            return None
        self.speaking, self.silent_from = False, None
        return Edge(EdgeKind.STOPPED, round(end))

    def cut(self) -> bool:
        """The turn being spoken ends here, its speaker not stopped (the turn reached its
        bound): True when the speech goes on as the next turn from here. Where quiet had begun
        the watch goes quiet instead, so that the next turn starts with the speech, its
        padding in, and is never a tail of silence ended by the silence it already counted."""
        if self.speaking and self.silent_from is None:
            return True
        self.speaking, self.silent_from = False, None
        return False


class ServerTurns:
    """One session's server VAD: its scorer (state carried) and its watch."""

    def __init__(self, scores: SpeechScores, vad: ServerVad, rate: int) -> None:
        self._scores = scores
        self.rate = rate  # of the audio the scorer takes
        self.watch = TurnWatch(vad, scores.window_s)

    async def heard(self, pcm16: bytes) -> list[Edge]:
        """The edges the newly appended audio completes (the model runs off the loop)."""
        probabilities = await to_thread.run_sync(self._scores.feed, pcm16)
        return self.watch.scores(probabilities)

    def cut(self) -> bool:
        return self.watch.cut()
