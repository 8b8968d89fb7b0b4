"""A synthesis request: what one TTS job speaks, and how. Its canonical JSON is stored in the
cache as a document, so its sha256 is the job's content key and messages carry no text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.errors import PermanentError

# `pipelines.speech.encode.FORMATS`, named here without importing PyAV.
FORMATS = ("ogg", "wav", "mp3", "aac", "flac", "pcm")
MIN_SPEED, MAX_SPEED = 0.2, 4.0


@dataclass(frozen=True, slots=True)
class SynthesisRequest:
    text: str
    voice: str | None
    speed: float
    format: str

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "voice": self.voice, "speed": self.speed, "format": self.format}

    def to_bytes(self) -> bytes:
        """The canonical form: the same request always hashes the same."""
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: Mapping[str, Any], default_speed: float = 1.0) -> SynthesisRequest:
        """A request checked field by field; `PermanentError` names what is wrong."""
        text = data.get("text")
        fmt = data.get("format", "ogg")
        if not isinstance(text, str) or fmt not in FORMATS:
            raise PermanentError(
                f"a synthesis job needs `text` and a format of {', '.join(FORMATS)}"
            )
        speed = data.get("speed", default_speed)
        if isinstance(speed, bool) or not isinstance(speed, int | float):
            raise PermanentError(f"speed {speed!r} is not a number")
        if not MIN_SPEED < float(speed) <= MAX_SPEED:
            raise PermanentError(f"speed {speed} is outside {MIN_SPEED}-{MAX_SPEED}")
        voice = data.get("voice")
        if voice is not None and not isinstance(voice, str):
            raise PermanentError(f"voice {voice!r} is not a voice name")
        return cls(text, voice, float(speed), str(fmt))

    @classmethod
    def read(cls, path: Path, default_speed: float = 1.0) -> SynthesisRequest:
        """The request document a job names."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PermanentError(f"cannot read the synthesis request {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise PermanentError(f"{path} is not a synthesis request")
        return cls.from_json(data, default_speed)
