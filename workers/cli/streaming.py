"""`speak --stream`: audio written as each sentence is ready.

On the cluster it is a job like any other (deduplicated, cached, counted): the worker hands
the Ogg/Opus pages over as it encodes them, and a request already answered is the stored
file. With `--inline` this process synthesises it itself, as the in-process gateway would.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pipelines.errors import PermanentError
from pipelines.media import Capability
from pipelines.render import audio_tag
from workers.cli.common import connect_client
from workers.core import keys
from workers.core.settings import Settings

WAIT = 600.0  # seconds the command waits for its job (its stream, or its result)
RESULT_AFTER_END = 10.0  # seconds to wait for the stored result after the last chunk


def speak_stream(settings: Settings, text: str, args: argparse.Namespace) -> int:
    fmt = args.format or "ogg"
    if fmt != "ogg":
        raise PermanentError("--stream writes Ogg/Opus; drop --format wav")
    started = time.monotonic()
    out_path = Path(args.out) if args.out and args.out != "-" else None
    sink: BinaryIO = out_path.open("wb") if out_path else sys.stdout.buffer
    first_audio: float | None = None

    def wrote() -> None:
        nonlocal first_audio
        sink.flush()
        if first_audio is None:
            first_audio = time.monotonic() - started
            sys.stderr.write(f"mcp-media: first audio after {first_audio:.3f} s\n")

    info: dict[str, Any] = {}
    try:
        if args.inline:
            _here(settings, text, sink, wrote, info)
        else:
            for piece in _job(settings, text, args, info):
                sink.write(piece)
                wrote()
    finally:
        if out_path:
            sink.close()
    total = time.monotonic() - started
    if out_path:
        row: dict[str, object] = {
            "path": str(out_path.resolve()),
            "format": "ogg",
            "duration_s": info.get("duration_s"),
            "id": info.get("id"),  # the job (None with --inline): `mcp-media result ID`
            "sha256": info.get("sha256"),
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


def _job(
    settings: Settings, text: str, args: argparse.Namespace, info: dict[str, Any]
) -> Iterator[bytes]:
    """The job's pages as its worker writes them; the stored file when it is answered."""
    from workers.core.stage_configs import store_request, synthesis_request

    params = synthesis_request(text, settings, "ogg", args.speed, args.voice)
    request = store_request(settings, params)
    client = connect_client(settings)
    try:
        key = client.key(Capability.AUDIO_SYNTHESIZE, request.sha256)
        handle = client.submit_one(
            Capability.AUDIO_SYNTHESIZE,
            request.sha256,
            request.path,
            trace_id=args.trace_id,
            params={"stream": keys.chunks(key)},
        )
        info.update(id=handle.id, sha256=request.sha256)
        streamed = False
        if handle.envelope is None:
            for piece in client.stream(handle, WAIT):
                streamed = True
                yield piece
        # The result: stored right after the last chunk, or the answer of a request that
        # was answered (or joined a job that did not stream).
        (done,) = client.wait([handle], RESULT_AFTER_END if streamed else WAIT)
        output = done.envelope.output if done.envelope is not None else {}
        if isinstance(output.get("duration_s"), int | float):
            info["duration_s"] = float(output["duration_s"])
        if streamed:
            return
        if done.envelope is None:
            raise PermanentError(f"the job {handle.id} did not finish within {WAIT:.0f} s")
        if "path" not in output:
            raise PermanentError(f"the job {handle.id} {done.status}: {done.envelope.reason}")
        with Path(str(output["path"])).open("rb") as stored:
            yield from iter(lambda: stored.read(1 << 16), b"")
    finally:
        client.close()


def _here(
    settings: Settings,
    text: str,
    sink: BinaryIO,
    wrote: Callable[[], None],
    info: dict[str, Any],
) -> None:
    """Synthesised in this process (`--inline`), each sentence encoded into `sink` at once."""
    from pipelines.speech.audio import OggOpusWriter
    from workers.jobs.speech import build_synthesizer

    tts = build_synthesizer(settings)
    duration = 0.0
    with OggOpusWriter(sink, tts.sample_rate) as writer:
        for part in tts.stream(text):
            writer.write(part.samples)
            duration += len(part.samples) / part.sample_rate
            wrote()
    info["duration_s"] = round(duration, 3)
