"""`speak --stream`: synthesise in this process and write audio as each sentence is ready."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import BinaryIO

from pipelines.errors import PermanentError
from pipelines.render import audio_tag
from pipelines.speech.audio import OggOpusWriter
from workers.jobs.speech import build_synthesizer
from workers.settings import Settings


def speak_stream(settings: Settings, text: str, args: argparse.Namespace) -> int:
    fmt = args.format or "ogg"
    if fmt != "ogg":
        raise PermanentError("--stream writes Ogg/Opus; drop --format wav")
    tts = build_synthesizer(settings)
    started = time.monotonic()
    first_audio: float | None = None
    out_path = Path(args.out) if args.out and args.out != "-" else None
    sink: BinaryIO = out_path.open("wb") if out_path else sys.stdout.buffer
    duration = 0.0
    try:
        writer = OggOpusWriter(sink, tts.sample_rate)
        with writer:
            for part in tts.stream(text):
                writer.write(part.samples)
                sink.flush()
                duration += len(part.samples) / part.sample_rate
                if first_audio is None:
                    first_audio = time.monotonic() - started
                    sys.stderr.write(f"mcp-media: first audio after {first_audio:.3f} s\n")
    finally:
        if out_path:
            sink.close()
    total = time.monotonic() - started
    if out_path:
        row: dict[str, object] = {
            "path": str(out_path.resolve()),
            "format": "ogg",
            "duration_s": round(duration, 3),
            "media_tag": audio_tag(out_path.resolve(), "ogg"),
            "status": "done",
            "first_audio_s": round(first_audio or total, 3),
            "total_s": round(total, 3),
        }
        if args.json:
            sys.stdout.write(json.dumps(row) + "\n")
        else:
            sys.stdout.write(f"{row['media_tag']}\n")
    return 0
