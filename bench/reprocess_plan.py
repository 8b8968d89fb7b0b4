"""Planning a reprocess run from the store's index, at 100,000 and 1,000,000 items.

- `reprocess_plan_local_100k`: a real cache folder of 100,000 images (half with a result),
  planned by the run's own `select` (the folder is sorted by an external merge sort).
- `reprocess_plan_index_{100k,1m}`: a synthetic S3 listing (what ListObjectsV2 returns, in
  pages of 1,000 keys, generated as it is read) of that many input markers, half with a
  result, planned by the same `select` through the bucket's index (`S3Index`).
- `reprocess_s3_*`: a real SeaweedFS holding 3,000 blobs: S3 requests per item of the plan
  against the old plan (a listing and one HEAD per blob), measured by a botocore hook on
  every request the client makes; and the Redis bytes a run keeps (MEMORY USAGE of its lock,
  report and checkpoint on a real redis-server) after checkpointing 3,000 submissions.

Items/s is measured on a run without tracemalloc; peak memory (traced Python allocations)
on a second run of the same plan.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import shutil
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import redis

from bench.results import record
from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from tests.support.redis_servers import RedisProcess
from tests.support.seaweed import seaweed_s3
from workers.core import keys
from workers.core.operations import Selection
from workers.core.settings import Settings
from workers.files.blobs import BlobRef
from workers.files.index_layout import INPUTS_MARK, inputs_prefix, results_prefix
from workers.files.journal import Journal
from workers.files.s3 import S3Blobs, S3Bucket
from workers.files.s3_index import S3Index
from workers.files.shared_files import SharedFiles, open_shared_files
from workers.gateways.reprocess import Progress, Report, Tally, select
from workers.gateways.reprocess_plan import Checkpoint, Plan
from workers.state.coordination import RedisCoordination

VISION = Capability.VISION_SUMMARIZE
VERSION = "0a1b2c3d"
PAGE = 1000  # keys a ListObjectsV2 request answers
S3_ITEMS = 3000
MISSING = Selection(kinds=(MediaKind.IMAGE,))


def _sha(i: int) -> str:
    """A sha256-shaped name that sorts with `i` (its first 12 digits are `i`)."""
    return f"{i:012x}" + hashlib.blake2b(i.to_bytes(8, "big"), digest_size=26).hexdigest()


class ListedBucket:
    """A synthetic bucket holding `items` input markers (every other one with a result),
    listed in key order a page at a time, generated as they are read: `requests` counts
    the listing pages and HEADs it answered."""

    def __init__(self, items: int) -> None:
        self.items = items
        self.requests = 0

    def head(self, key: str) -> dict[str, Any] | None:
        self.requests += 1
        return {"size": 0, "modified": 0.0, "metadata": {}}  # the index marks: present

    def listing(self, prefix: str, after: str = "") -> Iterator[tuple[str, float, int]]:
        names: Iterator[str]
        if prefix == inputs_prefix(MediaKind.IMAGE):
            names = (f"{_sha(i)}.{1000 + i % 5000}.1700000000.png" for i in range(self.items))
        elif prefix == results_prefix(VISION, VERSION):
            names = (f"{_sha(i)}.json" for i in range(0, self.items, 2))
        else:
            names = iter(())
        for n, name in enumerate(names):
            if n % PAGE == 0:
                self.requests += 1
            if name > after:
                yield prefix + name, 1_700_000_000.0, 0


def _plan(settings: Settings, files: SharedFiles) -> Tally:
    tally = Tally()
    for _ in select(settings, MISSING, tally, lambda _c: VERSION, files):
        pass
    return tally


def _measure(name: str, settings: Settings, files: SharedFiles, items: int, note: str) -> None:
    started = time.perf_counter()
    tally = _plan(settings, files)
    seconds = time.perf_counter() - started
    assert tally.selected == items - items // 2 and tally.skipped == items // 2, tally
    tracemalloc.start()
    _plan(settings, files)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    record(
        f"{name}_items_per_s",
        {
            "value": round(items / seconds),
            "unit": f"items/s planned ({items:,} {note})",
            "baseline": None,
            "ratio": None,
            "target": "report",
            "better": "higher",
        },
    )
    record(
        f"{name}_peak_mb",
        {
            "value": round(peak / 1e6, 2),
            "unit": f"MB traced peak while planning ({items:,} {note})",
            "baseline": None,
            "ratio": None,
            "target": "value < 64",
            "better": "lower",
        },
    )


def _synthetic(settings: Settings, items: int, label: str) -> None:
    bucket = ListedBucket(items)
    s3 = cast(S3Bucket, bucket)
    files = SharedFiles(
        S3Blobs(s3), settings.sidecars(), Journal(settings.home / "jobs"), S3Index(s3)
    )
    _measure(f"reprocess_plan_index_{label}", settings, files, items, "synthetic S3 listing")
    per_item = bucket.requests / 2 / items  # two plans were run
    record(
        f"reprocess_plan_index_{label}_requests_per_item",
        {
            "value": round(per_item, 5),
            "unit": "S3 requests per item planned (listing pages of 1,000 and the index marks)",
            "baseline": None,
            "ratio": None,
            "target": "value < 0.01",
            "better": "lower",
        },
    )


def _local(root: Path, items: int) -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(root / "home")})
    folder = settings.media_cache().folder(MediaKind.IMAGE)
    folder.mkdir(parents=True)
    results = settings.results_root / VISION.value / VERSION
    results.mkdir(parents=True)
    for i in range(items):  # written in a scattered order, as a cache fills
        sha256 = _sha((i * 7919) % items)
        (folder / f"{sha256}.png").touch()
        if ((i * 7919) % items) % 2 == 0:
            (results / f"{sha256}.json").touch()  # planning lists sidecars, never reads them
    files = open_shared_files(settings)
    _measure("reprocess_plan_local_100k", settings, files, items, "cached images on disk")


def _counted(bucket: S3Bucket) -> Counter[str]:
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    bucket.client.meta.events.register("before-call.s3", count)
    return calls


def _s3(root: Path) -> None:
    with seaweed_s3(root / "seaweed") as server:
        settings = Settings.from_env(
            {"MCP_MEDIA_HOME": str(root / "s3-home"), **server.env("bench-reprocess")}
        )
        files = open_shared_files(settings)
        blobs = cast(S3Blobs, files.blobs)
        calls = _counted(blobs.bucket)
        source = root / "blob.png"
        for i in range(S3_ITEMS):
            data = secrets.token_bytes(64)
            source.write_bytes(data)
            ref = BlobRef(hashlib.sha256(data).hexdigest(), MediaKind.IMAGE, ".png", len(data))
            blobs.put(ref, source, "image/png")
            if i % 2 == 0:
                envelope = Envelope(Status.DONE, ResultKey(VISION, VERSION, ref.sha256), {})
                files.sidecars.write(envelope)
        stored = sum(calls.values()) / S3_ITEMS
        files.index.prepare([(VISION, VERSION)], unsettled=False)  # the first run's look
        assert blobs.bucket.head(INPUTS_MARK) is not None
        calls.clear()
        tally = _plan(settings, files)
        assert tally.selected + tally.skipped == S3_ITEMS, tally
        ours = sum(calls.values())
        calls.clear()
        for key, _modified, _size in blobs.bucket.listing("blobs/sha256/"):
            blobs.bucket.head(key)  # the plan before the index: a listing, a HEAD per blob
        before = sum(calls.values())
        record(
            "reprocess_s3_plan_requests_per_item",
            {
                "value": round(ours / S3_ITEMS, 5),
                "unit": f"S3 requests per item planned ({S3_ITEMS:,} blobs on SeaweedFS)",
                "baseline": round(before / S3_ITEMS, 5),
                "baseline_of": "a listing and one HEAD per blob (the plan before the index)",
                "ratio": round(before / max(ours, 1), 1),
                "target": "value < 0.01",
                "better": "lower",
            },
        )
        record(
            "reprocess_s3_store_requests_per_blob",
            {
                "value": round(stored, 3),
                "unit": "S3 requests to store a blob and its marker (and every other result)",
                "baseline": None,
                "ratio": None,
                "target": "report",
                "better": "lower",
            },
        )


def _redis(root: Path) -> None:
    server = RedisProcess(
        root / "redis",
        ["port {port}", 'save ""', "appendonly no"],
        lambda: redis.Redis("127.0.0.1", server.port, socket_timeout=2),
    )
    server.start()
    try:
        client = redis.Redis("127.0.0.1", server.port)
        coordination = RedisCoordination(client)
        tally = Tally(total=S3_ITEMS)
        report = Report(coordination, MISSING, Progress(tally, io.StringIO()))
        checkpoint = Checkpoint(coordination, MISSING)
        plan = Plan(MediaKind.IMAGE, VERSION)
        assert coordination.take_lock(keys.reprocess_lock("image"), "token", 30)
        for i in range(S3_ITEMS):  # what a run writes as it submits
            tally.selected = tally.enqueued = i + 1
            checkpoint.submitted(plan, _sha(i), i + 1)
            report.write()
        report.write(done=True)
        names = [
            keys.lock(keys.reprocess_lock("image")),
            keys.report(keys.reprocess_progress("image")),
            keys.report(keys.reprocess_checkpoint("image")),
        ]
        used = sum(int(client.memory_usage(name) or 0) for name in names)
        assert client.dbsize() == len(names), client.keys()
        client.close()
    finally:
        server.stop()
    record(
        "reprocess_redis_bytes_per_run",
        {
            "value": used,
            "unit": f"bytes of Redis a run keeps (lock, report, checkpoint) after {S3_ITEMS:,}"
            " submissions: the same for any count",
            "baseline": None,
            "ratio": None,
            "target": "value < 4096",
            "better": "lower",
        },
    )


def run() -> None:
    root = Path(tempfile.mkdtemp(prefix="mcp-media-bench-plan-"))
    try:
        settings = Settings.from_env({"MCP_MEDIA_HOME": str(root / "synthetic")})
        _synthetic(settings, 100_000, "100k")
        _synthetic(settings, 1_000_000, "1m")
        _local(root / "local", 100_000)
        _s3(root)
        _redis(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
