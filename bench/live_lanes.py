"""Live images beside an image batch, through the real pipeline: `python -m bench live_lanes`.

One vision worker of 4 threads against an OpenAI-protocol provider answering in LATENCY_S
(the fake server the tests use), the real client and gateway, three runs on one cluster:

- `alone`: LIVE live images, one at a time (submit to result): the live time alone;
- `batch`: BATCH images submitted to the batch lane, nothing else: the batch's throughput;
- `both`: another BATCH images to the batch lane, and live images one at a time, one every
  LIVE_EVERY_S, until the batch is done: the live time during the batch, and the batch's
  throughput with live traffic beside it.

Then the same for voice: one STT worker of 2 processes (1 thread each, the real whisper
model), a batch of VOICE_BATCH spoken clips of 8-12 s, and a live voice message of the same
length one every VOICE_EVERY_S.

Targets (issue "live work first"): live p50 during / alone <= 1.3, batch throughput with /
without live traffic >= 0.95. The live traffic itself takes a share of the slots (a live
call every LIVE_EVERY_S of LATENCY_S on 4 slots), printed beside the ratio.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from bench.api import CLIP_S, _wav
from bench.cluster import BenchCluster
from bench.jobs import _png, _vision_env, percentile
from bench.results import record
from bench.speech import ENV, Voice
from pipelines.engines.registry import load_tts
from pipelines.ingest import validate_image
from pipelines.media import Capability, MediaKind
from pipelines.results import Status
from tests.support.fake_openai import Behaviour, FakeOpenAI
from workers.core.capabilities import Lane
from workers.core.stage_configs import tts_config
from workers.gateways.cluster import MediaClient

LATENCY_S = 0.2
SLOTS = 4
BATCH = 2000
LIVE = 20
LIVE_EVERY_S = 2.0
VISION = Capability.VISION_SUMMARIZE
STT = Capability.AUDIO_TRANSCRIBE
VOICE_BATCH = 600
VOICE_LIVE = 10
VOICE_EVERY_S = 2.0
Blob = tuple[str, Path]
RUN_S: dict[Capability, list[float]] = {}  # each live job's run time, in the order measured


def _seed(cluster: BenchCluster, first: int, count: int) -> list[tuple[str, Path]]:
    cache = cluster.settings().media_cache()
    stored = [
        cache.store_bytes(
            _png(first + i, (16, 16)), MediaKind.IMAGE, mime="image/png", validate=validate_image
        )
        for i in range(count)
    ]
    return [(s.sha256, s.path) for s in stored]


def _live_one(client: MediaClient, blob: Blob, capability: Capability = VISION) -> float:
    started = time.perf_counter()
    handle = client.submit_one(capability, blob[0], blob[1])
    (done,) = client.wait([handle], timeout=300)
    if done.status is not Status.DONE:
        raise RuntimeError(f"a live {capability.value} job ended {done.status}")
    if done.envelope is not None:  # the job's own run time, apart from its wait for a slot
        RUN_S.setdefault(capability, []).append(done.envelope.elapsed_ms / 1000)
    return time.perf_counter() - started


def _batch(client: MediaClient, blobs: list[Blob], capability: Capability = VISION) -> float:
    """Submit `blobs` to the batch lane and wait for all: jobs per second, first submit to
    last result."""
    started = time.perf_counter()
    handles = [client.submit_one(capability, sha, path, lane=Lane.BATCH) for sha, path in blobs]
    done = client.wait(handles, timeout=1800)
    failed = [h for h in done if h.status is not Status.DONE]
    if failed:
        raise RuntimeError(f"{len(failed)} batch images did not finish: {failed[0].status}")
    return len(blobs) / (time.perf_counter() - started)


def _both(
    client: MediaClient,
    batch: list[Blob],
    live: list[Blob],
    capability: Capability = VISION,
    every: float = LIVE_EVERY_S,
) -> tuple[float, list[float]]:
    rate: list[float] = []
    runner = threading.Thread(
        target=lambda: rate.append(_batch(client, batch, capability)), daemon=True
    )
    runner.start()
    waits: list[float] = []
    time.sleep(2 * every)  # the batch lane fills first
    for blob in live:
        if not runner.is_alive():
            break
        tick = time.perf_counter()
        waits.append(_live_one(client, blob, capability))
        time.sleep(max(0.0, every - (time.perf_counter() - tick)))
    runner.join(timeout=1800)
    if not rate:
        raise RuntimeError("the batch beside live traffic did not finish")
    return rate[0], waits


def _record(name: str, value: float, unit: str, baseline: tuple[float, str], target: str) -> None:
    base, of = baseline
    ratio = round(value / base, 3) if base else None
    record(
        name,
        {
            "value": round(value, 4),
            "unit": unit,
            "baseline": round(base, 4),
            "baseline_of": of,
            "ratio": ratio,
            "target": target,
            "better": "higher" if unit == "jobs/s" else "lower",
        },
    )


def run_voice() -> None:
    with BenchCluster(ENV, models=True) as cluster:
        voice = Voice(load_tts(tts_config(cluster.settings())))
        cache = cluster.settings().media_cache()
        spoken = [voice.speech(i, *CLIP_S)[0] for i in range(8)]

        def clips(first: int, count: int) -> list[Blob]:
            made = [
                cache.store_bytes(
                    _wav(spoken[i % len(spoken)], voice.rate, first + i), MediaKind.AUDIO
                )
                for i in range(count)
            ]
            return [(m.sha256, m.path) for m in made]

        cluster.start_worker("stt", 2, MCP_MEDIA_STT__THREADS="1")
        with cluster.client() as client:
            _live_one(client, clips(10, 1)[0], STT)  # warm-up: both processes load the model
            alone = [_live_one(client, blob, STT) for blob in clips(100, VOICE_LIVE)]
            runs_alone = len(RUN_S[STT])
            without = _batch(client, clips(1000, VOICE_BATCH), STT)
            with_live, during = _both(
                client, clips(3000, VOICE_BATCH), clips(200, 8 * VOICE_LIVE), STT, VOICE_EVERY_S
            )
    ran_alone, ran_during = RUN_S[STT][1:runs_alone], RUN_S[STT][runs_alone:]
    print(
        f"  live voice run time (the job alone, no wait) p50 {percentile(ran_alone, 50):.2f} s "
        f"alone, {percentile(ran_during, 50):.2f} s during the batch (both cores busy)"
    )
    print(
        f"  live voice alone p50 {percentile(alone, 50):.2f} s; during a {VOICE_BATCH}-clip STT "
        f"batch ({len(during)} live) p50 {percentile(during, 50):.2f} s p99 "
        f"{percentile(during, 99):.2f} s; batch {without:.2f} clips/s alone, {with_live:.2f} "
        "clips/s beside live traffic"
    )
    if len(during) < 3:
        raise RuntimeError(f"only {len(during)} live voice messages ran during the batch")
    alone_of = "a live voice message with no batch"
    _record(
        "live_lanes_voice_p50_during_batch",
        percentile(during, 50),
        "s",
        (percentile(alone, 50), alone_of),
        "ratio <= 1.3",
    )
    _record(
        "live_lanes_voice_batch_throughput_beside_live",
        with_live,
        "jobs/s",
        (without, "the batch with no live traffic"),
        "report",
    )


def run() -> None:
    behaviour = Behaviour(latency=LATENCY_S)
    with FakeOpenAI(behaviour) as fake, BenchCluster(_vision_env(fake)) as cluster:
        cluster.start_worker("vision", concurrency=SLOTS)
        alone_blobs = _seed(cluster, 300_000, LIVE)
        during_blobs = _seed(cluster, 310_000, 10 * LIVE)
        first_batch = _seed(cluster, 400_000, BATCH)
        second_batch = _seed(cluster, 500_000, BATCH)
        with cluster.client() as client:
            _live_one(client, _seed(cluster, 299_000, 1)[0])  # warm-up
            alone = [_live_one(client, blob) for blob in alone_blobs]
            without = _batch(client, first_batch)
            with_live, during = _both(client, second_batch, during_blobs)
    share = LATENCY_S / LIVE_EVERY_S / SLOTS
    print(
        f"  live image alone p50 {percentile(alone, 50):.3f} s p99 {percentile(alone, 99):.3f} s; "
        f"during a {BATCH}-image batch ({len(during)} live) p50 {percentile(during, 50):.3f} s "
        f"p99 {percentile(during, 99):.3f} s; batch {without:.1f} jobs/s alone, {with_live:.1f} "
        f"jobs/s beside live traffic (which takes {share:.1%} of the slots)"
    )
    if len(during) < 5:
        raise RuntimeError(f"only {len(during)} live images ran during the batch")
    alone_of = "a live image with no batch"
    p50, p99 = percentile(during, 50), percentile(during, 99)
    _record(
        "live_lanes_image_p50_during_batch",
        p50,
        "s",
        (percentile(alone, 50), alone_of),
        "ratio <= 1.3",
    )
    _record(
        "live_lanes_image_p99_during_batch", p99, "s", (percentile(alone, 99), alone_of), "report"
    )
    _record(
        "live_lanes_batch_throughput_beside_live",
        with_live,
        "jobs/s",
        (without, "the batch with no live traffic"),
        "ratio >= 0.95",
    )
