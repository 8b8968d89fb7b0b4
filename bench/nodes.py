"""Shared-nothing nodes against one shared disk, side by side in one run.

Layout "shared disk": the producer and an stt worker share one home (what a mounted volume
gives every node). Layout "shared nothing": the producer's home and the worker's home share
only Redis and an S3 bucket (a real SeaweedFS on loopback). The same 10 s clips (distinct
bytes per job; Ogg/Opus voice notes, the target's input, and WAV) are transcribed through
each, alternating, on one worker process per layout.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.cluster import BenchCluster, models_root
from bench.results import record
from bench.speech import ENV, Voice, _stored
from pipelines.cache import CacheLimits, MediaCache
from pipelines.engines.registry import load_tts
from pipelines.media import Capability, MediaKind, StoredBlob
from pipelines.results import Status
from pipelines.speech.stt import Samples
from tests.support.audio_samples import encode
from tests.support.seaweed import seaweed_s3
from workers.core.settings import Settings
from workers.core.stage_configs import tts_config
from workers.files.blobs import BlobRef
from workers.files.node_cache import NodeCache
from workers.files.shared_files import open_shared_files

STT = Capability.AUDIO_TRANSCRIBE
ROUNDS = 16  # single jobs per layout, alternating
BURST = 12  # distinct clips at once per layout
FETCHES = 20
CLIENT_OPS = 50


def _clip(
    cache: MediaCache, work: Path, clip: Samples, rate: int, pad: int, fmt: str
) -> StoredBlob:
    """`clip` cached as a WAV, or as an Ogg/Opus voice note (what agents and chat apps send);
    `pad` silent samples make its bytes distinct."""
    if fmt == "wav":
        return _stored(cache, work, f"{fmt}-{pad}", clip, rate, pad)
    samples = np.concatenate([clip, np.zeros(pad, np.float32)])
    return cache.store_bytes(encode(samples, rate, "ogg-opus"), MediaKind.AUDIO)


def _one(
    cluster: BenchCluster, clip: Samples, rate: int, pad: int, work: Path, fmt: str = "ogg"
) -> float:
    """Seconds from submission to the stored result of one transcription."""
    cache = cluster.settings().media_cache()
    stored = _clip(cache, work, clip, rate, pad, fmt)
    with cluster.client() as client:
        start = time.perf_counter()
        handle = client.submit_one(STT, stored.sha256, stored.path)
        (done,) = client.wait([handle], timeout=300)
        elapsed = time.perf_counter() - start
    if done.status is not Status.DONE:
        raise RuntimeError(f"transcription ended {done.status}: {done.envelope}")
    return elapsed


def _overhead(
    shared: BenchCluster,
    nothing: BenchCluster,
    clip: Samples,
    rate: int,
    work: Path,
    fmt: str,
    seconds: float,
) -> None:
    """The same clip through both layouts, alternating, one job at a time."""
    times: dict[str, list[float]] = {"shared": [], "nothing": []}
    for i in range(ROUNDS):
        order = ("shared", "nothing") if i % 2 == 0 else ("nothing", "shared")
        for name in order:
            cluster = shared if name == "shared" else nothing
            times[name].append(_one(cluster, clip, rate, 10 + i, work, fmt))
    base = statistics.median(times["shared"]) * 1000
    ours = statistics.median(times["nothing"]) * 1000
    overhead = ours - base
    what = "Ogg/Opus voice note" if fmt == "ogg" else "WAV"
    print(
        f"  one {seconds:.1f} s clip as {what}, submit to result (median of {ROUNDS}, "
        f"alternating): shared disk {base:.1f} ms, shared nothing {ours:.1f} ms: "
        f"blob overhead {overhead:.1f} ms = {overhead / base:.1%} of the job"
    )
    record(
        "node_blob_overhead_per_job" if fmt == "ogg" else "node_blob_overhead_per_job_wav",
        {
            "value": round(overhead, 2),
            "unit": "ms",
            "baseline": round(base, 2),
            "baseline_of": f"the same {seconds:.0f} s clip ({what}) transcribed on one shared "
            "disk (submit to result), same run",
            "ratio": round(overhead / base, 4),
            "target": "ratio <= 0.05" if fmt == "ogg" else "report",
            "better": "lower",
        },
    )


def _burst(cluster: BenchCluster, clip: Samples, rate: int, base: int, work: Path) -> float:
    """Jobs per second for BURST distinct clips submitted at once."""
    cache = cluster.settings().media_cache()
    stored = [_clip(cache, work, clip, rate, base + i, "ogg") for i in range(BURST)]
    with cluster.client() as client:
        start = time.perf_counter()
        handles = [client.submit_one(STT, s.sha256, s.path) for s in stored]
        done = client.wait(handles, timeout=600)
        elapsed = time.perf_counter() - start
    if any(h.status is not Status.DONE for h in done):
        raise RuntimeError("a burst job did not finish")
    return BURST / elapsed


def _fetch(nothing: BenchCluster, worker_home: Path, work: Path, clip: Samples, rate: int) -> None:
    """A blob this node holds (found, hash checked) against one fetched from the bucket."""
    producer = nothing.settings()
    stored = _stored(producer.media_cache(), work, "fetch", clip, rate, 99_999)
    files = open_shared_files(producer)
    ref = BlobRef(stored.sha256, MediaKind.AUDIO, stored.path.suffix, stored.size)
    files.blobs.put(ref, stored.path)
    worker = nothing.settings(MCP_MEDIA_HOME=str(worker_home))
    cached, fetched = [], []
    for _ in range(FETCHES):
        fresh = Path(tempfile.mkdtemp(prefix="fetch-", dir=worker_home))
        node = NodeCache(_cache_at(worker, fresh), files.blobs, 1 << 30)
        start = time.perf_counter()
        node.local(ref)
        fetched.append(time.perf_counter() - start)
        start = time.perf_counter()
        node.local(ref)
        cached.append(time.perf_counter() - start)
        shutil.rmtree(fresh)
    ours, theirs = statistics.median(cached) * 1000, statistics.median(fetched) * 1000
    print(
        f"  a {stored.size / 1024:.0f} KiB clip on a worker node: held {ours:.2f} ms "
        f"(found, sha256 checked), fetched from the bucket {theirs:.2f} ms (median of {FETCHES})"
    )
    record(
        "node_blob_fetch_cached",
        {
            "value": round(ours, 3),
            "unit": "ms",
            "baseline": round(theirs, 3),
            "baseline_of": "the same blob fetched from the bucket into an empty cache, same run",
            "ratio": round(ours / theirs, 3),
            "target": "report",
            "better": "lower",
        },
    )


def _cache_at(settings: Settings, root: Path) -> MediaCache:
    return MediaCache(root, CacheLimits(settings.max_blob_bytes))


def _clients(endpoint_env: dict[str, str]) -> None:
    """boto3 (what we use: it survives a prefork worker's fork) against obstore, 10 KB."""
    import boto3
    import obstore
    from obstore.store import S3Store

    data = os.urandom(10_000)
    bucket = endpoint_env["MCP_MEDIA_STORE__URL"].removeprefix("s3://").split("/", 1)[0]
    common = {
        "endpoint": endpoint_env["AWS_ENDPOINT_URL"],
        "key": endpoint_env["AWS_ACCESS_KEY_ID"],
        "secret": endpoint_env["AWS_SECRET_ACCESS_KEY"],
    }
    b3 = boto3.session.Session().client(
        "s3",
        endpoint_url=common["endpoint"],
        aws_access_key_id=common["key"],
        aws_secret_access_key=common["secret"],
        region_name="us-east-1",
    )
    ob = S3Store(
        bucket,
        endpoint=common["endpoint"],
        access_key_id=common["key"],
        secret_access_key=common["secret"],
        region="us-east-1",
        client_options={"allow_http": True},
    )
    timings: dict[str, list[float]] = {"boto3": [], "obstore": []}
    for i in range(CLIENT_OPS):
        start = time.perf_counter()
        b3.put_object(Bucket=bucket, Key=f"clients/b/{i}", Body=data)
        b3.get_object(Bucket=bucket, Key=f"clients/b/{i}")["Body"].read()
        timings["boto3"].append(time.perf_counter() - start)
        start = time.perf_counter()
        obstore.put(ob, f"clients/o/{i}", data)
        bytes(obstore.get(ob, f"clients/o/{i}").bytes())
        timings["obstore"].append(time.perf_counter() - start)
    ours = statistics.median(timings["boto3"]) * 1000
    theirs = statistics.median(timings["obstore"]) * 1000
    print(f"  10 KB put + get: boto3 {ours:.2f} ms, obstore {theirs:.2f} ms (median of 50)")
    record(
        "s3_client_put_get_10kb",
        {
            "value": round(ours, 3),
            "unit": "ms",
            "baseline": round(theirs, 3),
            "baseline_of": "obstore (not fork-safe: hangs in a prefork child), same run",
            "ratio": round(ours / theirs, 3),
            "target": "report",
            "better": "lower",
        },
    )


def run() -> None:
    root = Path(tempfile.mkdtemp(prefix="mcp-media-bench-s3-"))
    try:
        with seaweed_s3(root / "seaweed") as s3:
            s3_env = s3.env("bench")
            with (
                BenchCluster(ENV, models=True) as shared,
                BenchCluster({**ENV, **s3_env}) as nothing,
            ):
                worker_home = root / "node-b"
                worker_home.mkdir()
                (worker_home / "models").symlink_to(models_root())
                voice = Voice(load_tts(tts_config(shared.settings())))
                clip, _ = voice.speech(0, 10.0, 10.5)
                seconds = len(clip) / voice.rate
                shared.start_worker("stt", 1)
                nothing.start_worker("stt", 1, MCP_MEDIA_HOME=str(worker_home))
                work = root / "clips"
                # Warm both workers (engines load on the first job).
                _one(shared, clip[: voice.rate * 2], voice.rate, 0, work)
                _one(nothing, clip[: voice.rate * 2], voice.rate, 0, work)
                for fmt in ("ogg", "wav"):
                    _overhead(shared, nothing, clip, voice.rate, work, fmt, seconds)
                rates = {
                    "shared": _burst(shared, clip, voice.rate, 1000, work),
                    "nothing": _burst(nothing, clip, voice.rate, 2000, work),
                }
                print(
                    f"  burst of {BURST} clips, one worker process each: shared disk "
                    f"{rates['shared']:.2f} jobs/s, shared nothing {rates['nothing']:.2f} jobs/s"
                )
                record(
                    "node_jobs_per_second_shared_nothing",
                    {
                        "value": round(rates["nothing"], 3),
                        "unit": "jobs/s",
                        "baseline": round(rates["shared"], 3),
                        "baseline_of": "the same burst on one shared disk, same run",
                        "ratio": round(rates["nothing"] / rates["shared"], 3),
                        "target": "report",
                        "better": "higher",
                    },
                )
                _fetch(nothing, worker_home, work, clip, voice.rate)
                _clients(s3_env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
