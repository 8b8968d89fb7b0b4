"""Speech regions laid end to end, read in windows of up to 30 s, with the map back to time.

Voice activity detection finds where people speak; whisper reads 30 s at a time. Decoding each
region alone pads a 3 s "yes" to a whole encoder pass and cuts sentences at the region's
edge; laying the regions end to end (a short silence between them) and reading windows from
the front fills every pass and lets whisper's own timestamps say where to continue. What a
window says is timed within the window; `to_time` maps it back to the audio, so a segment that
straddles two regions runs from the first one's time to the second one's.

Memory: the regions still to be read, at most one window plus one region.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

Samples = NDArray[np.float32]


@dataclass(slots=True)
class _Span:
    at: int  # first sample in the laid-out stream
    time_s: float  # where it starts in the audio
    length: int


@dataclass(slots=True)
class SpeechTimeline:
    rate: int
    gap_s: float = 0.3  # silence between two regions that were not contiguous in the audio
    _blocks: list[Samples] = field(default_factory=list)
    _spans: list[_Span] = field(default_factory=list)
    _start: int = 0  # laid-out position of the first sample still held
    _end: int = 0  # laid-out position after the last sample held

    @property
    def held_s(self) -> float:
        return (self._end - self._start) / self.rate

    @property
    def position(self) -> int:
        """Laid-out position of the next window's first sample."""
        return self._start

    def add(self, start_s: float, samples: Samples, silence_s: float = 0.0) -> None:
        """Append a region that starts at `start_s` in the audio, then `silence_s` of
        silence that is not the audio's (times in it map back to the region's end)."""
        if not len(samples):
            return
        if self._spans:
            last = self._spans[-1]
            contiguous = abs(last.time_s + last.length / self.rate - start_s) < 1 / self.rate
            if not contiguous:
                gap = int(self.gap_s * self.rate)
                self._blocks.append(np.zeros(gap, np.float32))
                self._end += gap
        self._spans.append(_Span(self._end, start_s, len(samples)))
        self._blocks.append(samples.astype(np.float32, copy=False))
        self._end += len(samples)
        if silence_s > 0:
            silence = np.zeros(int(silence_s * self.rate), np.float32)
            self._blocks.append(silence)
            self._end += len(silence)

    def window(self, max_s: float) -> Samples:
        """Up to `max_s` from the front (not consumed)."""
        return self.front(int(max_s * self.rate))

    def front(self, want: int) -> Samples:
        """Up to `want` samples from the front (not consumed)."""
        out: list[Samples] = []
        for block in self._blocks:
            if want <= 0:
                break
            out.append(block[:want])
            want -= len(out[-1])
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def cuts(self, max_s: float, count: int) -> list[int]:
        """Lengths (samples) of up to `count` windows laid from the front, each ending where
        the last region it can hold ends (with the silence after it: the next window starts
        where a region does, which is where its times map back to), or after `max_s` when it
        can hold none: windows decoded side by side cannot continue where the one before
        stopped, so they are cut where nobody speaks."""
        most = int(max_s * self.rate)
        ends = sorted({s.at for s in self._spans} | {self._end})
        lengths: list[int] = []
        at = self._start
        while len(lengths) < count and at < self._end:
            fitting = [e for e in ends if at < e <= at + most]
            stop = fitting[-1] if fitting else min(at + most, self._end)
            lengths.append(stop - at)
            at = stop
        return lengths

    def consume(self, seconds: float) -> None:
        """Drop `seconds` from the front (at least one sample, so reading always advances)."""
        drop = max(1, round(seconds * self.rate))
        drop = min(drop, self._end - self._start)
        self._start += drop
        while self._blocks and drop >= len(self._blocks[0]):
            drop -= len(self._blocks.pop(0))
        if drop and self._blocks:
            self._blocks[0] = self._blocks[0][drop:]
        # Spans wholly before the front are no longer needed, but one is kept for `to_time`.
        while len(self._spans) > 1 and self._spans[1].at <= self._start:
            self._spans.pop(0)

    def pauses_within(self, start: int, end: int) -> list[tuple[int, int]]:
        """Pauses of the audio's own that [`start`, `end`) runs over, as laid-out positions
        (where the speech before ends, where the speech after begins); regions that simply
        continue one another have none between them."""
        found = []
        for before, after in zip(self._spans, self._spans[1:], strict=False):
            stops = before.at + before.length
            if stops != after.at and start < stops and after.at < end:
                found.append((stops, after.at))
        return found

    def to_time(self, at: int, *, end: bool = False) -> float:
        """Audio time of laid-out position `at`. In a gap between regions, a start moves to
        the next region's start and an end back to the previous region's end."""
        spans = self._spans
        if not spans:
            return 0.0
        for i, span in enumerate(spans):
            if at < span.at:  # in the gap before `span`
                if end and i > 0:
                    prior = spans[i - 1]
                    return prior.time_s + prior.length / self.rate
                return span.time_s
            if at <= span.at + span.length:
                return span.time_s + (at - span.at) / self.rate
        last = spans[-1]
        return last.time_s + last.length / self.rate


# Where a phrase may be cut, best first: after a sentence's end, after a clause, between words.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？…])\s*")
_CLAUSE_END = re.compile(r"(?<=[,;:，；：、])\s*")
_WORD_GAP = re.compile(r"\s+")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")  # kana, CJK ideographs


def split_phrase(text: str, fraction: float) -> tuple[str, str]:
    """Cut `text` in two near `fraction` of its length, where the speaker paused: at a
    sentence's end if one lies within a quarter of the text of that point, else a clause's,
    else between words (between characters in Chinese or Japanese). ("", text) or (text, "")
    when no cut leaves words on both sides."""
    target = fraction * len(text)
    for pattern in (_SENTENCE_END, _CLAUSE_END, _WORD_GAP):
        cuts = [m.end() for m in pattern.finditer(text) if m.start() > 0 and m.end() < len(text)]
        near = [c for c in cuts if abs(c - target) <= len(text) / 4 or pattern is _WORD_GAP]
        if near:
            cut = min(near, key=lambda c: abs(c - target))
            return text[:cut].strip(), text[cut:].strip()
    if _UNSPACED.search(text) and 0 < round(target) < len(text):
        cut = round(target)  # written without spaces: any character boundary
        return text[:cut], text[cut:]
    return (text, "") if fraction >= 0.5 else ("", text)
