"""The speech door (`mcp-media serve`) with the official `openai` client, side by side in one
run:

- one clip transcribed over HTTP (upload, queue, one stt worker) against the same engine
  called in this process on the same clip, rounds alternating, best of N;
- 8 concurrent clients, each uploading distinct clips, on 2 worker processes: throughput and
  p50/p99 latency; the peer, faster-whisper-server (an OpenAI-compatible faster-whisper
  server) on the CTranslate2 weights `models prepare` starts from, 2 processes of 1 thread,
  the same clients and clips;
- time to the first audio byte of 600 characters of speech, streamed against not streamed.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import openai
from openai import OpenAI

from bench.cluster import ROOT, BenchCluster
from bench.peers import whisper_ct2_dir
from bench.results import record
from bench.speech import ENV, Voice, _tts_text
from pipelines.engines.registry import load_transcriber, load_tts, load_vad
from pipelines.speech.stt import transcribe
from tests.support.net import free_port, wait_for_port
from workers.core.stage_configs import stt_config, tts_config

ROUNDS = 3
CLIENTS = 8
PER_CLIENT = 3  # requests each client makes in a burst
BURST_ROUNDS = 2  # ours and the peer alternate; the best burst of each counts
CLIP_S = (8.0, 12.0)
SINGLE_S = 30.0


def _wav(samples: np.ndarray, rate: int, pad: int) -> bytes:
    """WAV bytes; `pad` silent samples make each upload distinct (no dedup hit)."""
    data = np.concatenate([samples, np.zeros(pad, np.float32)])
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(data, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


@contextlib.contextmanager
def _serve(cluster: BenchCluster, **env: str) -> Iterator[OpenAI]:
    port = free_port()
    log = cluster.home / "logs" / "serve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    key = "bench-key-" + "k" * 16
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "serve", "--port", str(port)],
            cwd=ROOT,
            env=cluster.env(MCP_MEDIA_API__KEY=key, **env),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)
        yield OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _peer_server(work: Path) -> Iterator[OpenAI]:
    """faster-whisper-server, 2 processes, each 1 CPU thread, int8, beam 1, English."""
    config = work / "fws.yaml"
    config.write_text(
        "models:\n"
        f"  - name: whisper-1\n    path: {whisper_ct2_dir()}\n"
        "    model_options: {device: cpu, compute_type: int8, cpu_threads: 1, num_workers: 1}\n"
        "    transcribe_options: {beam_size: 1, language: en}\n"
    )
    port = free_port()
    log = work / "fws.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "faster_whisper_server", "--config", str(config),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            stdout=out, stderr=subprocess.STDOUT, cwd=work,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, log, timeout=120)
        yield OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _single(cluster: BenchCluster, voice: Voice) -> None:
    """One clip over HTTP vs the same engine in this process, 1 stt process x 1 thread."""
    config = stt_config(cluster.settings())
    transcriber, detector = load_transcriber(config), load_vad(config)
    clip, _ = voice.speech(0, SINGLE_S, SINGLE_S)
    audio_s = len(clip) / voice.rate
    worker = cluster.start_worker("stt", 1, MCP_MEDIA_STT__THREADS="1")
    direct: list[float] = []
    http: list[float] = []
    work = Path(tempfile.mkdtemp(dir=cluster.home))
    with _serve(cluster) as api:
        api.audio.transcriptions.create(
            model="whisper-1", file=("w.wav", _wav(clip, voice.rate, 1))
        )
        for r in range(ROUNDS):
            data = _wav(clip, voice.rate, r + 2)
            path = work / f"clip-{r}.wav"
            path.write_bytes(data)
            for way in ("direct", "http") if r % 2 == 0 else ("http", "direct"):
                start = time.perf_counter()
                if way == "direct":
                    transcribe(path, transcriber, config, detector)
                    direct.append(time.perf_counter() - start)
                else:
                    api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data))
                    http.append(time.perf_counter() - start)
    cluster.stop_worker(worker)
    d, h = min(direct), min(http)
    print(f"  {audio_s:.1f} s clip: direct {[round(t, 3) for t in direct]} s, "
          f"http {[round(t, 3) for t in http]} s")  # fmt: skip
    record(
        "api_stt_http_vs_direct_throughput",
        {
            "value": round(audio_s / h, 2),
            "unit": "audio s/s",
            "baseline": round(audio_s / d, 2),
            "baseline_of": "the same engine in the bench process on the same clip, same run",
            "ratio": round(d / h, 3),
            "target": "ratio >= 0.85",
            "better": "higher",
        },
    )


def _burst(
    transcribe_one: Callable[[bytes], str], clips: list[bytes]
) -> tuple[float, list[float], int]:
    """CLIENTS threads each sending PER_CLIENT clips in turn: (seconds, latencies, errors)."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        for k in range(PER_CLIENT):
            data = clips[n * PER_CLIENT + k]
            start = time.perf_counter()
            try:
                transcribe_one(data)
            except (openai.OpenAIError, OSError) as exc:
                errors.append(exc)
                continue
            with lock:
                latencies.append(time.perf_counter() - start)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"  {len(errors)} failed requests, first: {errors[0]!r}")
    return time.perf_counter() - started, latencies, len(errors)


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _concurrent(cluster: BenchCluster, voice: Voice) -> None:
    """8 clients on 2 stt processes (1 thread each) and on the peer's 2 processes."""
    count = CLIENTS * PER_CLIENT
    clips: list[tuple[np.ndarray, int]] = []
    for i in range(count):
        samples, _ = voice.speech(i, *CLIP_S)
        clips.append((samples, i))
    audio_s = sum(len(s) for s, _ in clips) / voice.rate
    worker = cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
    work = Path(tempfile.mkdtemp(dir=cluster.home))
    runs: dict[str, list[tuple[float, list[float], int]]] = {"ours": [], "peer": []}
    with _serve(cluster) as api, _peer_server(work) as peer:

        def ours(data: bytes) -> str:
            return api.audio.transcriptions.create(model="whisper-1", file=("c.wav", data)).text

        def theirs(data: bytes) -> str:
            return peer.audio.transcriptions.create(model="whisper-1", file=("c.wav", data)).text

        for k in range(4):  # warm every process of both
            ours(_wav(clips[k][0][: voice.rate * 3], voice.rate, 10_000 + k))
            theirs(_wav(clips[k][0][: voice.rate * 3], voice.rate, 10_000 + k))
        # Both servers up, idle in turn; rounds alternate who goes first; new bytes each
        # round (ours would answer a repeat from its stored results).
        for r in range(BURST_ROUNDS):
            for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
                send = ours if who == "ours" else theirs
                data = [_wav(s, voice.rate, 100 * (r + 1) + p) for s, p in clips]
                runs[who].append(_burst(send, data))
    cluster.stop_worker(worker)
    figures = {who: min(found, key=lambda run: run[0]) for who, found in runs.items()}
    for who, found in runs.items():
        print(f"  {who}: bursts of {count} requests in {[round(run[0], 2) for run in found]} s")
    seconds, latencies, failed = figures["ours"]
    print(
        f"  ours: {count} requests ({audio_s:.0f} s of audio) in {seconds:.2f} s, "
        f"p50 {_pct(latencies, 50):.2f} s, p99 {_pct(latencies, 99):.2f} s, {failed} failed"
    )
    peer_rps = None
    if figures.get("peer"):
        p_seconds, p_latencies, p_failed = figures["peer"]
        peer_rps = round(len(p_latencies) / p_seconds, 3)
        print(f"  faster-whisper-server: {count} requests in {p_seconds:.2f} s, "
              f"p50 {_pct(p_latencies, 50):.2f} s, p99 {_pct(p_latencies, 99):.2f} s, "
              f"{p_failed} failed")  # fmt: skip
        for q in (50, 99):
            record(
                f"api_stt_8_clients_p{q}_vs_faster_whisper_server",
                {
                    "value": round(_pct(latencies, q), 3),
                    "unit": "s",
                    "baseline": round(_pct(p_latencies, q), 3),
                    "baseline_of": "faster-whisper-server, 2 processes x 1 thread, same clips",
                    "ratio": round(_pct(p_latencies, q) / _pct(latencies, q), 3),
                    "target": "report",
                    "better": "lower",
                },
            )
    rps = len(latencies) / seconds
    record(
        "api_stt_8_clients_2_procs_throughput",
        {
            "value": round(rps, 3),
            "unit": f"requests/s ({audio_s / count:.1f} s clips; failed {failed})",
            "baseline": peer_rps,
            "baseline_of": "faster-whisper-server, 2 processes x 1 thread, int8 beam 1, same "
            "weights, same 8 clients and clips, same run",
            "ratio": round(rps / peer_rps, 3) if peer_rps else None,
            "target": "value >= baseline" if peer_rps else "report",
            "better": "higher",
        },
    )
    for q in (50, 99):
        record(
            f"api_stt_8_clients_latency_p{q}",
            {
                "value": round(_pct(latencies, q), 3),
                "unit": "s",
                "baseline": None,
                "ratio": None,
                "target": "report",
                "better": "lower",
            },
        )


def _first_byte(cluster: BenchCluster) -> None:
    """Time to the first audio byte of ~600 characters, streamed vs the whole file first."""
    worker = cluster.start_worker("tts", 1, MCP_MEDIA_TTS__THREADS="1")
    streamed: list[float] = []
    whole: list[float] = []
    with _serve(cluster) as api:
        api.audio.speech.create(model="tts-1", voice="alloy", input="Warm up.").read()
        for r in range(ROUNDS):
            for way in ("stream", "whole") if r % 2 == 0 else ("whole", "stream"):
                text = _tts_text(2 * r + (way == "whole"))  # distinct: never a cache hit
                extra = None if way == "stream" else {"stream": False}
                start = time.perf_counter()
                with api.audio.speech.with_streaming_response.create(
                    model="tts-1",
                    voice="alloy",
                    input=text,
                    response_format="mp3",
                    extra_body=extra,
                ) as response:
                    pieces = response.iter_bytes()
                    next(pieces)
                    (streamed if way == "stream" else whole).append(time.perf_counter() - start)
                    for _ in pieces:
                        pass
    cluster.stop_worker(worker)
    s, w = min(streamed), min(whole)
    print(
        f"  first byte of {len(_tts_text(0))} characters: streamed "
        f"{[round(t, 3) for t in streamed]} s, whole file first {[round(t, 3) for t in whole]} s"
    )
    record(
        "api_tts_600_chars_first_byte_streamed",
        {
            "value": round(s, 3),
            "unit": "s",
            "baseline": round(w, 3),
            "baseline_of": "the same request with stream false (the file done first), same run",
            "ratio": round(w / s, 3),
            "target": "value <= baseline",
            "better": "lower",
        },
    )


def run() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        _first_byte(cluster)
        _single(cluster, voice)
        _concurrent(cluster, voice)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    run()
