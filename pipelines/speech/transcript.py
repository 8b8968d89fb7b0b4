"""A transcript and its text formats (text, json, srt, vtt): no numpy, no engine, so the
HTTP door formats results without loading what recognises them."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True)
class Word:
    """A word and when it is spoken (seconds), as OpenAI's verbose_json reports words."""

    word: str
    start: float
    end: float

    def to_dict(self) -> dict[str, object]:
        return {"word": self.word, "start": round(self.start, 3), "end": round(self.end, 3)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Word:
        return cls(str(data["word"]), float(data["start"]), float(data["end"]))


@dataclass(frozen=True, slots=True)
class Segment:
    """A timed phrase, with what whisper's decoding said of the window it came from (as
    OpenAI's verbose_json reports it): the tokens written (text and timestamps), the
    window's start in 10 ms frames, its mean log probability per token, the zlib ratio of
    its text and the probability of ``<|nospeech|>`` at its first step."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()
    seek: int = 0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0
    # What a recognizer found of each word when asked (times as the segment's); the
    # transcript gathers them, so they are not written with the segment.
    words: tuple[Word, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "text": self.text,
            "tokens": list(self.tokens),
            "seek": self.seek,
            "avg_logprob": round(self.avg_logprob, 4),
            "compression_ratio": round(self.compression_ratio, 4),
            "no_speech_prob": round(self.no_speech_prob, 4),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segment:
        return cls(
            float(data["start"]),
            float(data["end"]),
            str(data["text"]),
            tuple(int(t) for t in data.get("tokens", ())),
            int(data.get("seek", 0)),
            float(data.get("avg_logprob", 0.0)),
            float(data.get("compression_ratio", 0.0)),
            float(data.get("no_speech_prob", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    segments: tuple[Segment, ...]
    language: str
    duration_s: float
    processing_s: float
    note: str | None = None  # NO_SPEECH_NOTE when nobody speaks in the audio
    words: tuple[Word, ...] | None = None  # None: word times were not asked for

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            **({"note": self.note} if self.note else {}),
            "language": self.language,
            "duration_s": round(self.duration_s, 3),
            "processing_s": round(self.processing_s, 3),
            "segments": [s.to_dict() for s in self.segments],
            **({} if self.words is None else {"words": [w.to_dict() for w in self.words]}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Transcript:
        """Back from `to_dict` (a job result's output)."""
        return cls(
            text=str(data.get("text", "")),
            segments=tuple(Segment.from_dict(s) for s in data.get("segments", [])),
            language=str(data.get("language", "")),
            duration_s=float(data.get("duration_s", 0.0)),
            processing_s=float(data.get("processing_s", 0.0)),
            note=data.get("note"),
            words=None if "words" not in data else tuple(Word.from_dict(w) for w in data["words"]),
        )


class TranscriptFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    SRT = "srt"
    VTT = "vtt"


def format_transcript(
    transcript: Transcript, fmt: TranscriptFormat | str, words: bool = False
) -> str:
    """`words`: subtitles with one cue per word (the transcript's `words`)."""
    match TranscriptFormat(fmt):
        case TranscriptFormat.TEXT:
            return to_text(transcript)
        case TranscriptFormat.JSON:
            return to_json(transcript)
        case TranscriptFormat.SRT:
            return to_srt(transcript, words)
        case TranscriptFormat.VTT:
            return to_vtt(transcript, words)


def to_text(transcript: Transcript) -> str:
    return transcript.text + "\n" if transcript.text else ""


def to_json(transcript: Transcript) -> str:
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=2) + "\n"


def _timestamp(seconds: float, sep: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{millis:03d}"


def _cue_text(text: str) -> str:
    # Long chunks make long cues: wrap for readability; "-->" would end a cue line early.
    return "\n".join(textwrap.wrap(text.replace("-->", "->"), width=42)) or text


def _cues(transcript: Transcript, words: bool) -> list[tuple[float, float, str]]:
    """(start, end, text) of each segment, or of each word when `words` (no words were
    timed: none)."""
    if words:
        return [(w.start, w.end, w.word) for w in transcript.words or ()]
    return [(s.start, s.end, s.text) for s in transcript.segments]


def to_srt(transcript: Transcript, words: bool = False) -> str:
    cues = [
        f"{i}\n{_timestamp(start, ',')} --> {_timestamp(end, ',')}\n{_cue_text(text)}\n"
        for i, (start, end, text) in enumerate(_cues(transcript, words), start=1)
    ]
    return "\n".join(cues)


def to_vtt(transcript: Transcript, words: bool = False) -> str:
    cues = [
        f"{_timestamp(start, '.')} --> {_timestamp(end, '.')}\n"
        + _cue_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        + "\n"
        for start, end, text in _cues(transcript, words)
    ]
    return "\n".join(["WEBVTT\n", *cues])
