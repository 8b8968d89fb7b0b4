"""Speech on the real models: each pipeline (enqueue to result through one worker) against
the same engine called in this process on the same input, measured side by side in one
run; a burst with processes x threads 1x2 vs 2x1; first audio when streaming; worker RSS."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.cluster import BenchCluster
from bench.peers import FasterWhisper, PiperTts, wer
from bench.results import Entry, record
from pipelines.cache import MediaCache
from pipelines.engines.registry import load_transcriber, load_tts, load_vad
from pipelines.media import Capability, JobRequest, MediaKind, StoredBlob
from pipelines.results import Status
from pipelines.speech.audio import write_wav
from pipelines.speech.config import SttConfig
from pipelines.speech.stt import Samples, Transcriber, transcribe
from pipelines.speech.tts import TextToSpeech
from pipelines.speech.vad import SpeechDetector
from tests.support.cluster import Worker
from workers.core.stage_configs import store_request, stt_config, synthesis_request, tts_config
from workers.gateways.cluster import JobHandle, MediaClient

ROUNDS = 5  # best of this many each: at 3 the direct run's spread (11 %) exceeded the margin
PEER_ROUNDS = 5  # ours and the peer alternate, best of this many each
LONG_S = 60.0
PAUSE_S = 0.4
CLIPS = 10
CLIP_S = (10.0, 15.0)
STT = Capability.AUDIO_TRANSCRIBE
TTS = Capability.AUDIO_SYNTHESIZE
ENV = {
    "MCP_MEDIA_STT__THREADS": "1",
    "MCP_MEDIA_TTS__THREADS": "1",
    "MCP_MEDIA_TTS__NOISE_SCALE": "0",  # deterministic voice: same audio in both paths
    "MCP_MEDIA_TTS__NOISE_SCALE_W": "0",
}
SENTENCES = (
    "The invoice was paid on Monday morning before the bank opened.",
    "Please call the front desk after lunch and ask for the manager.",
    "Our train leaves from platform nine at a quarter past six.",
    "The garden needs water every evening during the summer months.",
    "She parked the blue car near the old bank on the corner.",
    "We will review the budget next week with the whole team.",
    "The library closes early on Fridays and opens late on Sundays.",
    "He forgot his umbrella on the bus and got wet on the way home.",
    "The new printer on the second floor is finally working again.",
    "Remember to bring the signed contract to the meeting tomorrow.",
    "The children built a small boat out of wood and painted it red.",
    "A cold wind blew across the harbour as the ferry came in.",
    "The recipe calls for two eggs, a cup of flour and some butter.",
    "Our flight was delayed by three hours because of the storm.",
    "The museum opened a new exhibition about ancient maps last month.",
    "Please turn off the lights and lock the door when you leave.",
)
# Eight sentences, about 600 characters; reordered per run so no two requests are identical.
TTS_SENTENCES = (
    "The quarterly report shows that sales grew by twelve percent in the north.",
    "Most of the growth came from new customers who joined in the spring campaign.",
    "Costs stayed flat, although shipping became more expensive by the end of June.",
    "The support team answered nine out of ten requests within one working day.",
    "Next quarter we plan to open two offices and hire about forty new people.",
    "The board asked for a clearer forecast and a plan to reduce delivery delays.",
    "Please send your comments on the draft before Thursday so we can finish it.",
    "Thank you all for the hard work that made these results possible.",
)


def _tts_text(variant: int) -> str:
    order = list(TTS_SENTENCES)
    k = variant % len(order)
    order = order[k:] + order[:k]
    if (variant // len(order)) % 2:
        order.reverse()
    return " ".join(order)


class Voice:
    """The in-process voice, with each sentence's audio kept for building clips."""

    def __init__(self, tts: TextToSpeech) -> None:
        self.tts = tts
        self.rate = tts.sample_rate
        self._said: dict[str, Samples] = {}

    def say(self, sentence: str) -> Samples:
        if sentence not in self._said:
            speech = self.tts.synthesize(sentence)
            assert speech.samples is not None
            self._said[sentence] = speech.samples
        return self._said[sentence]

    def speech(self, first: int, min_s: float, max_s: float) -> tuple[Samples, str]:
        """Sentences from SENTENCES[first:] (wrapping) joined by pauses, <= max_s long,
        padded with silence to at least min_s."""
        pause = np.zeros(int(PAUSE_S * self.rate), np.float32)
        parts: list[Samples] = []
        words: list[str] = []
        for i in range(first, first + 10 * len(SENTENCES)):
            sentence = SENTENCES[i % len(SENTENCES)]
            step = [pause, self.say(sentence)] if parts else [self.say(sentence)]
            if sum(len(p) for p in parts + step) / self.rate > max_s:
                break
            parts += step
            words.append(sentence)
        missing = int(min_s * self.rate) - sum(len(p) for p in parts)
        if missing > 0:
            parts.append(np.zeros(missing, np.float32))
        return np.concatenate(parts), " ".join(words)


def _stored(
    cache: MediaCache, folder: Path, name: str, clip: Samples, rate: int, pad: int
) -> StoredBlob:
    """`clip` as a cached WAV; `pad` extra silent samples make its bytes (its key) distinct."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = np.concatenate([clip, np.zeros(pad, np.float32)])
    return cache.store_file(write_wav(folder / f"{name}.wav", samples, rate), MediaKind.AUDIO)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _finished(handles: Sequence[JobHandle]) -> list[JobHandle]:
    for handle in handles:
        if handle.status is not Status.DONE or handle.envelope is None:
            reason = handle.envelope.reason if handle.envelope is not None else "timeout"
            raise RuntimeError(f"{handle.key.capability.value} job ended {handle.status}: {reason}")
    return list(handles)


def _run_one(client: MediaClient, job: JobRequest, timeout: float = 600) -> JobHandle:
    (handle,) = _finished(client.wait(client.submit([job]), timeout=timeout))
    return handle


def _peak_rss(worker: Worker, name: str, target: str) -> None:
    peaks = worker.peak_rss_mib()
    if not peaks:
        raise RuntimeError(f"no pool child found under worker pid {worker.proc.pid}")
    print(f"  {name} worker pool children VmHWM: { {k: round(v, 1) for k, v in peaks.items()} }")
    record(
        f"{name}_worker_peak_rss",
        {
            "value": round(max(peaks.values()), 1),
            "unit": "MiB",
            "baseline": None,
            "ratio": None,
            "target": target,
            "better": "lower",
        },
    )


def _compare(name: str, audio_s: float, direct: list[float], pipeline: list[float]) -> None:
    d, p = min(direct), min(pipeline)
    print(
        f"  {name}: audio {audio_s:.1f} s; direct {[round(t, 3) for t in direct]} s, "
        f"pipeline {[round(t, 3) for t in pipeline]} s (best of {len(direct)} each)"
    )
    throughput: Entry = {
        "value": round(audio_s / p, 2),
        "unit": "audio s/s",
        "baseline": round(audio_s / d, 2),
        "baseline_of": "the same engine called in the bench process on the same input, same run",
        "ratio": round(d / p, 3),
        "target": "ratio >= 0.9",
        "better": "higher",
    }
    record(f"{name}_pipeline_vs_direct_throughput", throughput)
    rtf: Entry = {
        "value": round(p / audio_s, 4),
        "unit": "RTF",
        "baseline": round(d / audio_s, 4),
        "baseline_of": "the same engine called in the bench process on the same input, same run",
        "ratio": round(p / d, 3),
        "target": "report",
        "better": "lower",
    }
    record(f"{name}_pipeline_rtf", rtf)


def _stt(cluster: BenchCluster, voice: Voice, work: Path) -> None:
    settings = cluster.settings()
    config = stt_config(settings)
    transcriber, detector = load_transcriber(config), load_vad(config)
    cache = settings.media_cache()
    long, said = voice.speech(0, LONG_S, LONG_S)
    audio_s = len(long) / voice.rate
    short, _ = voice.speech(5, 3.0, 6.0)
    worker = cluster.start_worker("stt", 1, MCP_MEDIA_STT__THREADS="1")
    direct: list[float] = []
    pipeline: list[float] = []
    with cluster.client() as client:
        warm = _stored(cache, work, "warm", short, voice.rate, 1)
        _run_one(client, JobRequest(STT, warm.sha256, warm.path))
        transcribe(warm.path, transcriber, config, detector)
        for r in range(ROUNDS):
            stored = _stored(cache, work, f"long-{r}", long, voice.rate, r + 1)
            for path in ("direct", "pipeline") if r % 2 == 0 else ("pipeline", "direct"):
                start = time.perf_counter()
                if path == "direct":
                    local = transcribe(stored.path, transcriber, config, detector)
                    direct.append(time.perf_counter() - start)
                else:
                    handle = _run_one(client, JobRequest(STT, stored.sha256, stored.path))
                    pipeline.append(time.perf_counter() - start)
    assert handle.envelope is not None
    text = str(handle.envelope.output.get("text", ""))
    recall = len(_words(text) & _words(said)) / len(_words(said))
    print(
        f"  stt {audio_s:.1f} s: {len(text.split())} words, word recall {recall:.2f} "
        f"(direct: {len(local.text.split())} words); worker processing_s "
        f"{handle.envelope.output.get('processing_s')}"
    )
    _compare("stt_60s", audio_s, direct, pipeline)
    _peak_rss(worker, "stt", "value <= 600")
    cluster.stop_worker(worker)


def _tts(cluster: BenchCluster, voice: Voice) -> None:
    settings = cluster.settings()
    tts = voice.tts
    worker = cluster.start_worker("tts", 1, MCP_MEDIA_TTS__THREADS="1")
    direct: list[float] = []
    pipeline: list[float] = []
    durations: list[float] = []
    with cluster.client() as client:
        warm = store_request(settings, synthesis_request("Warming up.", settings, "wav"))
        _run_one(client, JobRequest(TTS, warm.sha256, warm.path))
        tts.synthesize("Warming up.")
        for r in range(ROUNDS):
            text = _tts_text(r)
            for path in ("direct", "pipeline") if r % 2 == 0 else ("pipeline", "direct"):
                start = time.perf_counter()
                if path == "direct":
                    speech = tts.synthesize(text)
                    direct.append(time.perf_counter() - start)
                    durations.append(speech.duration_s)
                else:
                    stored = store_request(settings, synthesis_request(text, settings, "wav"))
                    handle = _run_one(client, JobRequest(TTS, stored.sha256, stored.path))
                    pipeline.append(time.perf_counter() - start)
            assert handle.envelope is not None
            produced = float(handle.envelope.output["duration_s"])
            if abs(produced - speech.duration_s) > 0.05:
                raise RuntimeError(f"pipeline audio {produced} s vs direct {speech.duration_s} s")
    print(f"  tts: {len(_tts_text(0))} characters per request")
    _compare("tts_600_chars", statistics.median(durations), direct, pipeline)
    _peak_rss(worker, "tts", "value <= 500")
    cluster.stop_worker(worker)


def _first_audio(voice: Voice) -> None:
    text = _tts_text(0)
    first: list[float] = []
    full: list[float] = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        next(iter(voice.tts.stream(text)))
        first.append(time.perf_counter() - start)
        start = time.perf_counter()
        voice.tts.synthesize(text)
        full.append(time.perf_counter() - start)
    f, t = min(first), min(full)
    print(
        f"  tts first audio {[round(x, 3) for x in first]} s, full {[round(x, 3) for x in full]} s"
    )
    record(
        "tts_600_chars_first_audio_streaming",
        {
            "value": round(f * 1000, 1),
            "unit": "ms",
            "baseline": round(t * 1000, 1),
            "baseline_of": "full synthesis of the same text without streaming, same run",
            "ratio": round(t / f, 2),
            "target": "report",
            "better": "lower",
        },
    )


def _bursts(
    cluster: BenchCluster, clips: list[Samples], rate: int, config: tuple[int, int, int], tag: int
) -> list[float]:
    """Start one stt worker, warm each process, then time `bursts` bursts of all clips."""
    processes, threads, bursts = config
    cache = cluster.settings().media_cache()
    work = cluster.home / "bench-audio"
    worker = cluster.start_worker("stt", processes, MCP_MEDIA_STT__THREADS=str(threads))
    times: list[float] = []
    try:
        with cluster.client() as client:
            warm = [
                _stored(cache, work, f"warm-{tag}-{k}", clips[k][: rate * 3], rate, tag)
                for k in range(processes)
            ]
            _finished(client.wait(client.submit([_job(s) for s in warm]), timeout=300))
            for b in range(bursts):
                pad = 1000 * tag + 100 * b  # fresh bytes: no burst reuses an earlier result
                stored = [
                    _stored(cache, work, f"clip-{tag}-{b}-{i}", clip, rate, pad + i)
                    for i, clip in enumerate(clips)
                ]
                start = time.perf_counter()
                _finished(client.wait(client.submit([_job(s) for s in stored]), timeout=600))
                times.append(time.perf_counter() - start)
    finally:
        cluster.stop_worker(worker)
    return times


def _job(stored: StoredBlob) -> JobRequest:
    return JobRequest(STT, stored.sha256, stored.path)


def _burst(cluster: BenchCluster, voice: Voice) -> None:
    """Ten distinct 10-15 s clips at once: 1 process x 2 threads vs 2 processes x 1 thread,
    in the order A B B A so a drift in the machine's load hits both alike."""
    clips = [voice.speech(3 * i, *CLIP_S)[0] for i in range(CLIPS)]
    lengths = [round(len(c) / voice.rate, 1) for c in clips]
    times: dict[str, list[float]] = {"1x2": [], "2x1": []}
    for tag, (label, config) in enumerate(
        (("1x2", (1, 2, 1)), ("2x1", (2, 1, 2)), ("1x2", (1, 2, 1))), start=1
    ):
        times[label] += _bursts(cluster, clips, voice.rate, config, tag)
    print(
        f"  burst of {CLIPS} clips {lengths} s: 1x2 {[round(t, 2) for t in times['1x2']]} s, "
        f"2x1 {[round(t, 2) for t in times['2x1']]} s"
    )
    rates = {label: CLIPS / statistics.mean(t) for label, t in times.items()}
    record(
        "stt_burst_10_clips_1proc_x_2threads",
        {
            "value": round(rates["1x2"], 3),
            "unit": "clips/s",
            "baseline": None,
            "ratio": None,
            "target": "report",
            "better": "higher",
        },
    )
    record(
        "stt_burst_10_clips_2procs_x_1thread",
        {
            "value": round(rates["2x1"], 3),
            "unit": "clips/s",
            "baseline": round(rates["1x2"], 3),
            "baseline_of": "the same burst on 1 process x 2 threads, same run",
            "ratio": round(rates["2x1"] / rates["1x2"], 3),
            "target": "report",
            "better": "higher",
        },
    )


def _stt_vs_faster_whisper(
    config: SttConfig,
    transcriber: Transcriber,
    detector: SpeechDetector | None,
    voice: Voice,
    work: Path,
) -> None:
    """Our engine (decode + VAD + whisper) vs faster-whisper on the same WAV, 1 thread each."""
    peer = FasterWhisper()
    long, said = voice.speech(0, LONG_S, LONG_S)
    audio_s = len(long) / voice.rate
    work.mkdir(parents=True, exist_ok=True)
    path = write_wav(work / "peer-60s.wav", long, voice.rate)
    ours_t: list[float] = []
    peer_t: list[float] = []
    ours_text = peer_text = ""
    transcribe(path, transcriber, config, detector)  # warm both before timing
    peer.transcribe(path)
    for r in range(PEER_ROUNDS):
        for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
            start = time.perf_counter()
            if who == "ours":
                ours_text = transcribe(path, transcriber, config, detector).text
                ours_t.append(time.perf_counter() - start)
            else:
                peer_text = peer.transcribe(path)
                peer_t.append(time.perf_counter() - start)
    ours_wer, peer_wer = wer(said, ours_text), wer(said, peer_text)
    o, p = min(ours_t), min(peer_t)
    print(
        f"  stt vs faster-whisper on {audio_s:.1f} s: ours {[round(t, 3) for t in ours_t]} s "
        f"WER {ours_wer:.3f}; faster-whisper {[round(t, 3) for t in peer_t]} s "
        f"WER {peer_wer:.3f}\n    ours: {ours_text}\n    peer: {peer_text}"
    )
    record(
        "stt_60s_throughput_vs_faster_whisper",
        {
            "value": round(o / audio_s, 4),
            "unit": "RTF",
            "baseline": round(p / audio_s, 4),
            "baseline_of": "faster-whisper int8 beam 1, 1 thread, same weights and WAV, same run",
            "ratio": round(p / o, 3),
            "target": "ratio >= 1.0",
            "better": "lower",
        },
    )
    record(
        "stt_60s_wer_vs_faster_whisper",
        {
            "value": round(100 * ours_wer, 2),
            "unit": "% WER",
            "baseline": round(100 * peer_wer, 2),
            "baseline_of": "faster-whisper WER on the same clip, same normalisation, same run",
            "ratio": round(ours_wer / peer_wer, 3) if peer_wer else None,
            "target": "value <= baseline",
            "better": "lower",
        },
    )


def _tts_vs_piper(voice: Voice) -> None:
    """Our TTS (text -> phonemes -> sherpa VITS) vs piper-tts on the same voice file and
    text, 1 thread each, same noise scales; compared by wall time for the same text."""
    config = voice.tts.config
    peer = PiperTts(config.noise_scale, config.noise_scale_w)
    ours_t: list[float] = []
    peer_t: list[float] = []
    ours_s = peer_s = 0.0
    voice.tts.synthesize(_tts_text(0))
    peer.synthesize(_tts_text(0))
    for r in range(PEER_ROUNDS):
        text = _tts_text(r + 1)
        for who in ("ours", "peer") if r % 2 == 0 else ("peer", "ours"):
            start = time.perf_counter()
            if who == "ours":
                ours_s = voice.tts.synthesize(text).duration_s
                ours_t.append(time.perf_counter() - start)
            else:
                peer_s = peer.synthesize(text)
                peer_t.append(time.perf_counter() - start)
    o, p = min(ours_t), min(peer_t)
    print(
        f"  tts vs piper-tts, {len(_tts_text(0))} characters: ours {[round(t, 3) for t in ours_t]}"
        f" s for {ours_s:.2f} s of audio; piper {[round(t, 3) for t in peer_t]} s for "
        f"{peer_s:.2f} s of audio (ours adds {config.sentence_pause_s} s between sentences)"
    )
    record(
        "tts_600_chars_vs_piper_tts",
        {
            "value": round(o, 3),
            "unit": "s per request",
            "baseline": round(p, 3),
            "baseline_of": "piper-tts 1 thread, same voice file, same text, same run",
            "ratio": round(p / o, 3),
            "target": "ratio >= 1.0",
            "better": "lower",
        },
    )


def run() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        work = cluster.home / "bench-audio"
        _tts(cluster, voice)
        _first_audio(voice)
        _tts_vs_piper(voice)
        _stt(cluster, voice, work)
        config = stt_config(cluster.settings())
        transcriber, detector = load_transcriber(config), load_vad(config)
        _stt_vs_faster_whisper(config, transcriber, detector, voice, work)
        del transcriber, detector
        _burst(cluster, voice)
