"""Speech to text: audio file -> `Transcript` with timed segments, and its text formats.

Audio is decoded once, straight to the recognizer's rate (16 kHz for whisper). Up to
`single_pass_s` it is one region (with `single_pass_silence_s` of silence after it); longer
audio streams through voice activity detection (or is cut at quiet points without a detector)
into speech regions. The regions are laid end to end (`windows.SpeechTimeline`) and read in
windows of `max_segment_s` (whisper takes 30 s at most), decoded with timestamps: each
window's pieces become segments timed back to the audio, and the next window starts where its
last complete piece ended, as whisper's own transcribe loop does. A `checkpoint` call follows
every window; a time limit can fire there.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pipelines.errors import ConfigError
from pipelines.results import NO_SPEECH_NOTE
from pipelines.speech.audio import AudioSource, iter_audio
from pipelines.speech.batches import in_lockstep, side_by_side
from pipelines.speech.chinese_script import converts
from pipelines.speech.config import SttConfig

# The transcript and its formats live in `transcript` (no numpy); re-exported here.
from pipelines.speech.transcript import (
    Segment as Segment,
)
from pipelines.speech.transcript import (
    Transcript as Transcript,
)
from pipelines.speech.transcript import (
    TranscriptFormat as TranscriptFormat,
)
from pipelines.speech.transcript import (
    Word as Word,
)
from pipelines.speech.transcript import (
    format_transcript as format_transcript,
)
from pipelines.speech.transcript import (
    to_json as to_json,
)
from pipelines.speech.transcript import (
    to_srt as to_srt,
)
from pipelines.speech.transcript import (
    to_text as to_text,
)
from pipelines.speech.transcript import (
    to_vtt as to_vtt,
)
from pipelines.speech.vad import (
    SpeechChunk,
    SpeechDetector,
    speech_chunks,
    window_chunks,
)
from pipelines.speech.whisper_folder import (
    WhisperFiles as WhisperFiles,
)
from pipelines.speech.whisper_folder import (
    validate_model_dir as validate_model_dir,
)
from pipelines.speech.windows import SpeechTimeline, split_phrase

Samples = NDArray[np.float32]

WHISPER_MAX_S = 30.0
_MIN_WINDOW_S = 0.1  # a remainder shorter than this after the last window is not read
# Below this (about -78 dBFS, a few steps of 16-bit audio) a sample is digital silence: a
# window of nothing else is not decoded (whisper hears "you" in it), and a window's leading
# silence is skipped but for `_LEAD_IN_S`.
_DIGITAL_SILENCE = 1.25e-4
_LEAD_IN_S = 0.3
# Whisper's timestamps are this coarse: a phrase that overlaps a pause by less is not cut there.
_TIMESTAMP_SLOP_S = 0.5
WHISPER_RATE = 16_000


class Transcriber(Protocol):
    """A loaded recognizer: mono float32 at `sample_rate` in, text out (<= 30 s a call)."""

    @property
    def sample_rate(self) -> int: ...

    def transcribe(self, samples: Samples) -> str: ...

    def recognise_window(
        self, samples: Samples, language: str = ""
    ) -> tuple[tuple[Segment, ...], float, str]:
        """(pieces timed within the window, seconds used, language code); the next window
        starts where this one's last complete piece ended. "" detects the language."""
        ...


class WordTranscriber(Transcriber, Protocol):
    """A recognizer that can also time each word (`Segment.words`) when its model can."""

    @property
    def word_timestamps(self) -> bool: ...

    def recognise_window(
        self, samples: Samples, language: str = "", words: bool = False
    ) -> tuple[tuple[Segment, ...], float, str]: ...


@dataclass(frozen=True, slots=True)
class Progress:
    """Passed to the checkpoint after each window; raise from it to stop early."""

    done_s: float
    segments: int
    elapsed_s: float
    said: tuple[Segment, ...] = ()  # what this window said (empty: nobody spoke in it)


Checkpoint = Callable[[Progress], None]


@dataclass(slots=True)
class _Counter:
    samples: int = 0

    def count(self, audio: Iterator[Samples]) -> Iterator[Samples]:
        for block in audio:
            self.samples += len(block)
            yield block


def transcribe(
    source: AudioSource,
    transcriber: Transcriber,
    config: SttConfig,
    detector: SpeechDetector | None = None,
    checkpoint: Checkpoint | None = None,
    chinese: Callable[[str], str] | None = None,
) -> Transcript:
    """Decode `source` and recognise it; see the module docstring for the strategy.

    `chinese` writes Mandarin in the script the config chose (`chinese_script`; None: as
    whisper wrote it), segment by segment, before anything else sees the text."""
    started = time.perf_counter()
    rate = transcriber.sample_rate
    timer = _word_timer(transcriber) if config.word_timestamps else None
    if detector is not None and detector.sample_rate != rate:
        raise ConfigError(f"VAD runs at {detector.sample_rate} Hz, the recognizer at {rate} Hz")
    counter = _Counter()
    audio = counter.count(iter_audio(source, rate, config.limits))
    single_pass = int(min(config.single_pass_s, config.max_segment_s) * rate)
    head: list[Samples] = []
    for block in audio:
        head.append(block)
        if counter.samples > single_pass:
            break
    if counter.samples <= single_pass:
        whole = SpeechChunk(0.0, np.concatenate(head), rate)
        chunks: Iterator[SpeechChunk] = iter(_speech_span(whole, detector))
        silence_s = config.single_pass_silence_s
    elif detector is not None:
        chunks = speech_chunks(itertools.chain(head, audio), detector, config.max_segment_s)
        silence_s = 0.0
    else:
        chunks = window_chunks(itertools.chain(head, audio), rate, config.max_segment_s)
        silence_s = 0.0
    del head
    timeline = SpeechTimeline(rate)
    multilingual = bool(getattr(transcriber, "multilingual", True))
    # Windows read together: in one call to an engine that batches them (word timestamps
    # keep the one-window path), else from a thread each on an engine that allows it.
    lockstep = _batcher(transcriber) if timer is None else None
    together = lockstep is not None or getattr(transcriber, "concurrent", False)
    batch = config.batch_windows if together and silence_s == 0 else 1
    pool = ThreadPoolExecutor(batch, "stt-window") if batch > 1 and lockstep is None else None
    segments: list[Segment] = []
    words: list[Word] = []
    # Given, or detected on the first window with speech and kept for the rest: one language
    # per transcript, so a quiet window cannot flip a Chinese note into English.
    language = config.language

    def place(pieces: tuple[Segment, ...], heard: str, at: int) -> tuple[Segment, ...]:
        """A window's pieces (timed within it, laid out from `at`) as segments and words."""
        nonlocal language
        spoken = language or heard
        write = chinese if chinese is not None and converts(spoken) else None
        seek = round(timeline.to_time(at) * 100)
        kept = [
            (piece, text)
            for piece in pieces
            if (text := _clean(write(piece.text) if write else piece.text))
        ]
        said = tuple(
            segment
            for piece, text in kept
            for segment in timed_segments(
                timeline,
                replace(piece, text=text, seek=seek, words=()),
                at + int(piece.start * rate),
                at + int(piece.end * rate),
            )
        )
        if said:
            language = spoken
            segments.extend(said)
            words.extend(
                Word(
                    write(word.word) if write else word.word,
                    round(timeline.to_time(at + int(word.start * rate)), 3),
                    round(timeline.to_time(at + int(word.end * rate), end=True), 3),
                )
                for piece, _ in kept
                for word in piece.words
            )
        return said

    def report(said: tuple[Segment, ...], upto: int) -> None:
        if checkpoint is not None:
            done_s = timeline.to_time(upto, end=True)
            checkpoint(Progress(done_s, len(segments), time.perf_counter() - started, said))

    def decode(samples: Samples) -> tuple[tuple[Segment, ...], float, str]:
        if timer is not None:
            return timer.recognise_window(samples, language, words=True)
        return transcriber.recognise_window(samples, language)

    def read_one() -> None:
        samples = timeline.window(config.max_segment_s)
        quiet = leading_silence(samples, rate)
        if quiet:  # nothing to hear there: whisper would only make words up
            timeline.consume(quiet / rate)
            return
        at = timeline.position
        pieces, used_s, heard = decode(samples)
        said = place(pieces, heard, at)
        timeline.consume(used_s)
        report(said, timeline.position)

    def read_batch() -> None:
        lengths = timeline.cuts(config.max_segment_s, batch)
        front = timeline.front(sum(lengths))
        starts = [timeline.position + sum(lengths[:i]) for i in range(len(lengths))]
        windows = np.split(front, np.cumsum(lengths)[:-1])
        if lockstep is not None:
            spoken = language
            decoded = in_lockstep(lambda rests: lockstep(rests, spoken), windows, rate)
        else:
            assert pool is not None
            decoded = side_by_side(pool, decode, windows, rate)
        for at, window, (pieces, _, heard) in zip(starts, windows, decoded, strict=True):
            report(place(pieces, heard, at), at + len(window))
        timeline.consume(len(front) / rate)

    def read(final: bool) -> None:
        while True:
            # A multilingual model detects the language on its first window with speech,
            # alone: every window after it is read in that language.
            batched = batch > 1 and bool(language or not multilingual)
            window_s = config.max_segment_s * (batch if batched else 1)
            if timeline.held_s < window_s and not (final and timeline.held_s >= _MIN_WINDOW_S):
                return
            if batched:
                read_batch()
            else:
                read_one()

    try:
        for chunk in chunks:
            timeline.add(chunk.start_s, chunk.samples, silence_s)
            read(final=False)
        read(final=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return Transcript(
        text=" ".join(s.text for s in segments),
        segments=tuple(segments),
        language=language or "en",
        duration_s=counter.samples / rate,
        processing_s=time.perf_counter() - started,
        note=None if segments else NO_SPEECH_NOTE,
        words=tuple(words) if timer is not None else None,
    )


def _batcher(
    transcriber: Transcriber,
) -> Callable[[list[Samples], str], list[tuple[tuple[Segment, ...], float, str]]] | None:
    method = getattr(transcriber, "recognise_windows", None)
    return method if callable(method) else None


def _word_timer(transcriber: Transcriber) -> WordTranscriber:
    if not getattr(transcriber, "word_timestamps", False):
        raise ConfigError(
            "this speech model cannot time words: only mcp-media's own whisper export does"
            " (sherpa-onnx folders cannot); a whisper folder prepared before word timestamps"
            " needs `mcp-media models prepare` again"
        )
    return transcriber  # type: ignore[return-value]


def timed_segments(
    timeline: SpeechTimeline, phrase: Segment, start: int, end: int
) -> list[Segment]:
    """Segments of one `phrase` laid out at [`start`, `end`], timed back to the audio.

    A phrase that runs over a pause between two speech regions (whisper sometimes joins two
    sentences across the short silence the regions are laid out with) is cut there, so no
    segment stays on screen through a pause of the audio's own: the text is cut where the
    speaker most likely paused (`split_phrase`), in proportion to the speech on each side.
    Less than `_TIMESTAMP_SLOP_S` on one side is the timestamps' slop: nothing is cut, the
    phrase moves to the other side. The phrase's tokens stay with its first part.
    """
    parts: list[Segment] = []
    rest, low = phrase.text, start
    slop = int(_TIMESTAMP_SLOP_S * timeline.rate)

    def part(first: int, last: int, text: str) -> Segment:
        begin, finish = timeline.to_time(first), timeline.to_time(last, end=True)
        tokens = () if parts else phrase.tokens
        return replace(
            phrase, start=round(begin, 3), end=round(finish, 3), text=text, tokens=tokens
        )

    for stops, resumes in timeline.pauses_within(start, end):
        before, after = stops - low, end - resumes  # speech on each side, in samples
        if before < slop:  # the phrase only seems to start before the pause
            left = ""
        elif after < slop:  # ... or to end after it
            left, rest = rest, ""
        else:
            left, rest = split_phrase(rest, before / (before + after))
        if left:
            parts.append(part(low, stops, left))
        low = resumes
        if not rest:
            return parts
    parts.append(part(low, end, rest))
    return parts


def _speech_span(whole: SpeechChunk, detector: SpeechDetector | None) -> list[SpeechChunk]:
    """Audio read in one pass, from where its speech starts to where it ends (so segment
    times land on the speech, not on 0.0 after leading silence); nothing when the detector
    hears no speech at all. Without a detector, the whole audio."""
    if detector is None:
        return [whole]
    found = list(speech_chunks([whole.samples], detector, WHISPER_MAX_S))
    if not found:
        return []
    rate = whole.sample_rate
    first, last = round(found[0].start_s * rate), round(found[-1].end_s * rate)
    return [SpeechChunk(first / rate, whole.samples[first:last], rate)]


def leading_silence(samples: Samples, rate: int) -> int:
    """Samples of digital silence (nothing above about -78 dBFS) at the front of `samples`,
    less a short lead-in kept before the sound: all of them when there is no sound at all,
    0 when the sound starts within `_LEAD_IN_S`."""
    loud = np.flatnonzero(np.abs(samples) >= _DIGITAL_SILENCE)
    if not len(loud):
        return len(samples)
    lead = int(loud[0]) - int(_LEAD_IN_S * rate)
    return lead if lead > 0 else 0


# Whisper describes sounds when nobody speaks: "(wind blowing)", "[BLANK_AUDIO]", "(Bell)".
_SOUND_ONLY = re.compile(r"^(?:\s*[(\[*♪][^)\]*♪]*[)\]*♪])+\s*$")


def _clean(text: str) -> str:
    text = " ".join(text.split())
    # A sound tag, or no letter or digit at all (a lone "[" or "..." on noise), is no speech.
    if _SOUND_ONLY.match(text) or not any(ch.isalnum() for ch in text):
        return ""
    return text
