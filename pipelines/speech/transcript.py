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

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            **({"note": self.note} if self.note else {}),
            "language": self.language,
            "duration_s": round(self.duration_s, 3),
            "processing_s": round(self.processing_s, 3),
            "segments": [s.to_dict() for s in self.segments],
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
        )


class TranscriptFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    SRT = "srt"
    VTT = "vtt"


def format_transcript(transcript: Transcript, fmt: TranscriptFormat | str) -> str:
    match TranscriptFormat(fmt):
        case TranscriptFormat.TEXT:
            return to_text(transcript)
        case TranscriptFormat.JSON:
            return to_json(transcript)
        case TranscriptFormat.SRT:
            return to_srt(transcript)
        case TranscriptFormat.VTT:
            return to_vtt(transcript)


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


def to_srt(transcript: Transcript) -> str:
    cues = [
        f"{i}\n{_timestamp(s.start, ',')} --> {_timestamp(s.end, ',')}\n{_cue_text(s.text)}\n"
        for i, s in enumerate(transcript.segments, start=1)
    ]
    return "\n".join(cues)


def to_vtt(transcript: Transcript) -> str:
    cues = [
        f"{_timestamp(s.start, '.')} --> {_timestamp(s.end, '.')}\n"
        + _cue_text(s.text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        + "\n"
        for s in transcript.segments
    ]
    return "\n".join(["WEBVTT\n", *cues])
