"""Realtime transcription (`/v1/realtime?intent=transcription` on `mcp-media serve`): the time
from the end of a turn's audio to its `.completed` event, with server VAD (the session ends
the turn itself) and with the client's commit.

Each run streams one short clip (a sentence of the bench voice) at the pace a microphone
sends it, 100 ms a message; the clock starts when the append holding the speech's last sample
is written and stops when `.completed` is read (a reader thread stamps each event as it
arrives). With the commit, the client commits right then; with server VAD, the client goes
on streaming quiet (600 ms, paced) and the session must first hear 500 ms of it, so that
figure holds the silence a live turn waits for. Each
(mode, run) speaks a different sentence, so no turn is answered from a stored result; modes
alternate who goes first. Ours runs as a user runs it: a cluster (embedded broker, one stt
worker, one thread) and serve in front of it. Report only.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import threading
import time
from typing import Any

import numpy as np
import websocket

from bench.api import _serve
from bench.cluster import BenchCluster
from bench.results import record
from bench.speech import ENV, SENTENCES, Voice
from pipelines.engines.registry import load_tts
from workers.core.stage_configs import tts_config

RUNS = 5
RATE = 24_000
PIECE_S = 0.1
QUIET_S = 0.6
COMPLETED = "conversation.item.input_audio_transcription.completed"
VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
       "silence_duration_ms": 500}  # fmt: skip


def _pcm24(samples: np.ndarray, rate: int) -> bytes:
    count = int(len(samples) * RATE / rate)
    at = np.linspace(0, len(samples) - 1, count)
    speech = np.interp(at, np.arange(len(samples)), samples)
    return bytes((np.clip(speech, -1, 1) * 32767).astype("<i2").tobytes())


def _turn(url: str, key: str, speech: bytes, vad: bool) -> tuple[float, str]:
    """Seconds from the speech's last append written to `.completed` read, and the
    transcript."""
    ws = websocket.create_connection(url, header=[f"Authorization: Bearer {key}"], timeout=300)
    events: list[tuple[float, dict[str, Any]]] = []

    def read() -> None:
        while True:
            event = json.loads(ws.recv())
            events.append((time.perf_counter(), event))
            if event["type"] in (COMPLETED, "error"):
                return

    update = {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": RATE},
        "transcription": {"model": "whisper-1", "language": "en"},
        "turn_detection": VAD if vad else None}}}  # fmt: skip
    ws.send(json.dumps({"type": "session.update", "session": update}))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    step = int(PIECE_S * RATE) * 2
    quiet = bytes(int(QUIET_S * RATE) * 2) if vad else b""
    pieces = [speech[i : i + step] for i in range(0, len(speech), step)]
    pieces += [quiet[i : i + step] for i in range(0, len(quiet), step)]
    spoken = -(-len(speech) // step)  # the pieces holding speech
    paced = time.perf_counter()
    ended = paced
    for n, piece in enumerate(pieces):
        audio = base64.b64encode(piece).decode()
        ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        if n == spoken - 1:
            ended = time.perf_counter()
            if not vad:
                ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        paced += len(piece) / 2 / RATE
        time.sleep(max(0.0, paced - time.perf_counter()))
    reader.join(timeout=300)
    ws.close()
    at, last = events[-1]
    if last["type"] != COMPLETED:
        raise RuntimeError(f"no transcript: {last}")
    return at - ended, str(last["transcript"])


def run() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        cluster.start_worker("stt", 1)
        with _serve(cluster) as api:
            url = str(api.base_url).replace("http://", "ws://").rstrip("/")
            url += "/realtime?intent=transcription"
            _turn(url, api.api_key, _pcm24(voice.say("Warm up the model."), voice.rate), False)
            times: dict[str, list[float]] = {"server_vad": [], "commit": []}
            for r in range(RUNS):
                modes = ("server_vad", "commit") if r % 2 == 0 else ("commit", "server_vad")
                for n, mode in enumerate(modes):
                    sentence = SENTENCES[(2 * r + n) % len(SENTENCES)]
                    pcm = _pcm24(voice.say(sentence), voice.rate)
                    seconds, text = _turn(url, api.api_key, pcm, mode == "server_vad")
                    times[mode].append(seconds)
                    print(f"  {mode} {seconds:.3f} s: {text!r}")
    audio_s = statistics.mean(len(voice.say(s)) / voice.rate for s in SENTENCES[: 2 * RUNS])
    for mode, found in times.items():
        how = (
            "server VAD, which hears 500 ms of quiet first"
            if mode == "server_vad"
            else "the client's commit"
        )
        record(
            f"realtime_end_of_speech_to_completed_{mode}",
            {
                "value": round(statistics.median(found), 3),
                "unit": f"s from the end of speech (median of {RUNS}; best {min(found):.3f}, "
                f"worst {max(found):.3f}; turns of {audio_s:.1f} s of speech at 24 kHz, 100 ms "
                f"appends, ended by {how})",
                "baseline": None,
                "ratio": None,
                "target": "report",
                "better": "lower",
            },
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    run()
