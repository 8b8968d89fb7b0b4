"""A 10-minute recording against faster-whisper's `BatchedInferencePipeline`.

The recording is our piper voice reading known sentences (0.4 s between sentences, 1.5 s
between paragraphs of five), built once and kept under the bench's home
(`<home>/bench/long-audio/`, named by a hash of its text and voice) so a second run reuses it.
It runs through:

- ours, windows decoded in lockstep (`stt.batch_windows` 2, 4 and 8: one encoder run and
  one decoder run a step for the batch, on one onnxruntime session of two threads):
  `pipelines.speech.stt.transcribe` with VAD, as a job runs it; its best batch is ours;
- ours one window at a time (batch 1, two threads), for reference;
- faster-whisper's batched pipeline on the very CTranslate2 weights ours are converted from
  (`bench.peers.whisper_ct2_dir`), int8, beam 1, two CPU threads, at batch 2, 4 and 8: its
  best is the baseline.

Each side uses both cores. Times are wall seconds, best of `ROUNDS` rounds for every batch
size on both sides, the two sides alternating (one round one window at a time): on a shared
machine process time would count every thread's work, not how soon the transcript is there.
Model loading is outside the timings on both sides.
"""

from __future__ import annotations

import hashlib
import json
import time
import wave
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.peers import wer, whisper_ct2_dir
from bench.results import record
from bench.speech import SENTENCES, TTS_SENTENCES
from pipelines.engines.registry import load_transcriber, load_tts, load_vad
from pipelines.speech.audio import write_wav
from pipelines.speech.config import SttConfig, TtsConfig
from pipelines.speech.stt import Samples, transcribe
from workers.core.settings import Settings
from workers.provisioning.models import prepare

LENGTH_S = 600.0
PAUSE_S, PARAGRAPH_S, PARAGRAPH = 0.4, 1.5, 5
VOICE = "piper-en_US-joe-medium"
BATCHES = (2, 4, 8)  # tried on both sides; each side's best is compared
ROUNDS = 2
THREADS = 2  # the machine's cores: each side uses them all


def recording(home: Path) -> tuple[Path, str]:
    """(WAV, its text): built from our TTS on the first run, reused after."""
    sentences = [*SENTENCES, *TTS_SENTENCES]
    key = hashlib.sha256(json.dumps([VOICE, LENGTH_S, PAUSE_S, sentences]).encode()).hexdigest()
    folder = home / "bench" / "long-audio"
    wav, text = folder / f"{key[:16]}.wav", folder / f"{key[:16]}.txt"
    if wav.is_file() and text.is_file():
        return wav, text.read_text(encoding="utf-8")
    tts = load_tts(
        TtsConfig(home / "models" / VOICE, threads=THREADS, noise_scale=0.0, noise_scale_w=0.0)
    )
    rate, total = tts.sample_rate, 0
    said: dict[str, Samples] = {}
    parts: list[Samples] = []
    spoken: list[str] = []
    while total < LENGTH_S * rate:
        sentence = sentences[len(spoken) % len(sentences)]
        if sentence not in said:
            speech = tts.synthesize(sentence)
            assert speech.samples is not None
            said[sentence] = speech.samples
        spoken.append(sentence)
        pause = PARAGRAPH_S if len(spoken) % PARAGRAPH == 0 else PAUSE_S
        parts += [said[sentence], np.zeros(int(pause * rate), np.float32)]
        total += len(said[sentence]) + len(parts[-1])
    folder.mkdir(parents=True, exist_ok=True)
    write_wav(wav, np.concatenate(parts), rate)
    text.write_text(" ".join(spoken), encoding="utf-8")
    return wav, " ".join(spoken)


def _timed(run: Callable[[], str]) -> tuple[float, str]:
    started = time.perf_counter()
    text = run()
    return time.perf_counter() - started, text


def run() -> None:
    home = Settings().home
    prepare(home, tier="default")
    models = home / "models"
    wav, said = recording(home)
    single = SttConfig(models / "whisper-tiny.en", models / "silero-vad", threads=THREADS)
    engine = load_transcriber(single)
    detector = load_vad(single)

    def ours(size: int) -> Callable[[], str]:
        config = replace(single, batch_windows=size)
        return lambda: transcribe(wav, engine, config, detector).text

    from faster_whisper import BatchedInferencePipeline, WhisperModel

    model = WhisperModel(
        str(whisper_ct2_dir()), device="cpu", compute_type="int8", cpu_threads=THREADS
    )
    pipeline = BatchedInferencePipeline(model)

    def peer(size: int) -> Callable[[], str]:
        def go() -> str:
            segments, _ = pipeline.transcribe(str(wav), beam_size=1, language="en", batch_size=size)
            return " ".join(segment.text.strip() for segment in segments)

        return go

    with wave.open(str(wav)) as header:
        audio_s = header.getnframes() / header.getframerate()
    print(f"  recording {wav.name}: {audio_s:.0f} s, {len(said.split())} words")
    figures: dict[str, tuple[float, float]] = {}

    def measure(name: str, go: Callable[[], str]) -> None:
        seconds, text = _timed(go)
        best = min(seconds, figures.get(name, (seconds, 0.0))[0])
        figures[name] = (best, wer(said, text))
        print(f"    {name}: {seconds:.2f} s, WER {100 * wer(said, text):.2f} %", flush=True)

    ours(BATCHES[0])()  # warm both before timing (VAD, first sessions' runs)
    peer(BATCHES[0])()
    for _ in range(ROUNDS):
        for size in BATCHES:
            measure(f"faster-whisper batch {size}", peer(size))
            measure(f"ours batch {size}", ours(size))

    def best_of(side: str) -> int:
        return min(BATCHES, key=lambda size: figures[f"{side} batch {size}"][0])

    peer_best, ours_best = best_of("faster-whisper"), best_of("ours")
    peer_name, ours_name = f"faster-whisper batch {peer_best}", f"ours batch {ours_best}"
    measure("ours one window at a time", ours(1))
    (o, o_wer), (p, p_wer) = figures[ours_name], figures[peer_name]
    one, one_wer = figures["ours one window at a time"]
    peer_of = f"faster-whisper BatchedInferencePipeline batch {peer_best}, int8 beam 1, 2 threads"
    record(
        "stt_long_600s_vs_faster_whisper_batched",
        {
            "value": round(o, 2),
            "unit": "s",
            "baseline": round(p, 2),
            "baseline_of": f"{peer_of}, same weights and WAV, same run; ours at {ours_name}",
            "ratio": round(p / o, 3),
            "target": "ratio >= 1.0",
            "better": "lower",
        },
    )
    record(
        "stt_long_600s_wer_vs_faster_whisper_batched",
        {
            "value": round(100 * o_wer, 2),
            "unit": "% WER",
            "baseline": round(100 * p_wer, 2),
            "baseline_of": f"{peer_of}, same normalisation, same run",
            "ratio": round(o_wer / p_wer, 3) if p_wer else None,
            "target": "value <= baseline",
            "better": "lower",
        },
    )
    record(
        "stt_long_600s_one_window_at_a_time",
        {
            "value": round(one, 2),
            "unit": "s",
            "baseline": round(o, 2),
            "baseline_of": f"ours batched ({ours_name}), same run; WER {100 * one_wer:.2f} %",
            "ratio": round(one / o, 3),
            "target": "report",
            "better": "lower",
        },
    )
