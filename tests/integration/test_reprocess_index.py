"""Planning a reprocess run on a real S3 server (SeaweedFS) from the index the store keeps:
markers written as blobs and results are stored, one backfill for what was stored before,
no request per blob when planning (every request the S3 client makes is counted), and a
run killed with SIGKILL resumed after its checkpoint."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from tests.integration.conftest import Cluster
from tests.integration.test_reprocess import HIGH_WATER_2, killed_at_high_water
from tests.integration.test_vision_jobs import noisy_png
from workers.core.capabilities import CAPABILITIES
from workers.core.operations import Selection
from workers.core.settings import Settings
from workers.files.blobs import BlobRef
from workers.files.index_layout import INPUTS_MARK, OUTPUTS, inputs_prefix, unsettled_prefix
from workers.files.s3 import S3Blobs, S3Bucket
from workers.files.shared_files import SharedFiles, open_shared_files
from workers.gateways.reprocess import Tally, select

pytestmark = pytest.mark.integration

Nodes = tuple[Cluster, Cluster]


def counted(files: SharedFiles) -> Counter[str]:
    """Every request the store's S3 client makes from now on, by operation."""
    calls: Counter[str] = Counter()
    bucket = bucket_of(files)

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    bucket.client.meta.events.register("before-call.s3", count)
    return calls


def bucket_of(files: SharedFiles) -> S3Bucket:
    assert isinstance(files.blobs, S3Blobs)
    return files.blobs.bucket


def blob(tmp_path: Path, kind: MediaKind, ext: str) -> tuple[BlobRef, Path]:
    data = secrets.token_bytes(200)
    path = tmp_path / f"{secrets.token_hex(4)}{ext}"
    path.write_bytes(data)
    return BlobRef(hashlib.sha256(data).hexdigest(), kind, ext, len(data)), path


def names(bucket: S3Bucket, prefix: str) -> list[str]:
    return [key[len(prefix) :] for key, _m, _s in bucket.listing(prefix)]


def plan(settings: Settings, files: SharedFiles, **how: Any) -> tuple[list[str], Tally]:
    tally = Tally()
    chosen = select(settings, Selection(kinds=(MediaKind.IMAGE,), **how), tally, files=files)
    return [item.sha256 for item in chosen], tally


def test_the_plan_lists_the_index_and_heads_no_blob(nodes: Nodes, tmp_path: Path) -> None:
    settings = nodes[0].settings()
    files = open_shared_files(settings)
    bucket = bucket_of(files)
    images = [blob(tmp_path, MediaKind.IMAGE, ".png") for _ in range(40)]
    for ref, path in images:
        assert files.blobs.put(ref, path, "image/png")
    reply, reply_path = blob(tmp_path, MediaKind.AUDIO, ".wav")
    assert files.blobs.put(reply, reply_path, "audio/wav", output=True)
    # Storing wrote the markers: one per input of its kind, one per output.
    assert len(names(bucket, inputs_prefix(MediaKind.IMAGE))) == 40
    assert names(bucket, OUTPUTS) == [reply.sha256]
    assert names(bucket, inputs_prefix(MediaKind.AUDIO)) == []

    version = CAPABILITIES[Capability.VISION_SUMMARIZE].version(settings)
    done = sorted(ref.sha256 for ref, _ in images)[:12]
    degraded = sorted(ref.sha256 for ref, _ in images)[12:15]
    for sha256, status in [(s, Status.DONE) for s in done] + [
        (s, Status.DEGRADED) for s in degraded
    ]:
        files.sidecars.write(
            Envelope(status, ResultKey(Capability.VISION_SUMMARIZE, version, sha256), {})
        )
    unsettled = unsettled_prefix(Capability.VISION_SUMMARIZE, version)
    assert names(bucket, unsettled) == degraded  # written with the result that is not done

    files.index.prepare([(Capability.VISION_SUMMARIZE, version)], unsettled=True)
    calls = counted(files)
    chosen, tally = plan(settings, files)
    everything = sorted(ref.sha256 for ref, _ in images)
    assert chosen == everything[15:] and tally.skipped == 15
    # Listings only: the inputs, the outputs and the results, one page each at this size.
    assert set(calls) == {"ListObjectsV2"} and calls["ListObjectsV2"] == 3, calls

    calls.clear()
    chosen, tally = plan(settings, files, include_degraded=True)
    assert chosen == everything[12:] and tally.skipped == 12
    assert set(calls) == {"ListObjectsV2"}, calls

    # A forced run lists the inputs alone; a run resumed after a sha256 lists after it.
    calls.clear()
    assert plan(settings, files, mode="all")[0] == everything
    assert dict(calls) == {"ListObjectsV2": 2}
    index = files.index
    after = everything[19]
    assert [i.sha256 for i in index.inputs(MediaKind.IMAGE, after)] == everything[20:]
    assert list(index.results(Capability.VISION_SUMMARIZE, version, everything[13])) == [
        everything[14]
    ]
    assert (
        list(index.unsettled(Capability.VISION_SUMMARIZE, version, everything[12]))
        == (everything[13:15])
    )


def test_blobs_stored_before_the_index_are_indexed_once(nodes: Nodes, tmp_path: Path) -> None:
    settings = nodes[0].settings()
    files = open_shared_files(settings)
    bucket = bucket_of(files)
    older = [blob(tmp_path, MediaKind.IMAGE, ".jpg") for _ in range(25)]
    for ref, path in older:  # as a node from before the index stored them: no marker
        metadata = {"kind": ref.kind.value, "ext": ref.ext, "size": str(ref.size)}
        assert bucket.put_file(ref.key, path, metadata, "image/jpeg")
    reply, reply_path = blob(tmp_path, MediaKind.AUDIO, ".wav")
    metadata = {"kind": "audio", "ext": ".wav", "size": str(reply.size), "output": "1"}
    assert bucket.put_file(reply.key, reply_path, metadata, "audio/wav")
    version = CAPABILITIES[Capability.VISION_SUMMARIZE].version(settings)
    first = sorted(ref.sha256 for ref, _ in older)[0]
    key = ResultKey(Capability.VISION_SUMMARIZE, version, first)
    raw = Envelope(Status.FAILED, key, {}).to_json()
    bucket.put_bytes(
        f"results/{key.capability.value}/{version}/{first}.json", json.dumps(raw).encode()
    )
    assert plan(settings, files)[0] == []  # nothing indexed yet

    calls = counted(files)
    filled = files.index.prepare([(Capability.VISION_SUMMARIZE, version)], unsettled=True)
    assert filled.blobs_marked == 26 and filled.results_read == 1 and filled.unsettled_marked == 1
    assert calls["HeadObject"] == 26 + 2  # each blob once, and the two marks looked up
    assert bucket.head(INPUTS_MARK) is not None
    assert names(bucket, OUTPUTS) == [reply.sha256]
    everything = sorted(ref.sha256 for ref, _ in older)
    chosen, _ = plan(settings, files, include_degraded=True)
    assert chosen == everything  # the failed one too
    assert plan(settings, files)[0] == everything[1:]

    calls.clear()
    again = files.index.prepare([(Capability.VISION_SUMMARIZE, version)], unsettled=True)
    assert again.blobs_marked == 0 and again.results_read == 0
    assert dict(calls) == {"HeadObject": 2}  # the marks say it was done: nothing listed

    # Blobs an older node stored later: --backfill-index HEADs those alone.
    late = [blob(tmp_path, MediaKind.IMAGE, ".jpg") for _ in range(3)]
    for ref, path in late:
        metadata = {"kind": ref.kind.value, "ext": ref.ext, "size": str(ref.size)}
        assert bucket.put_file(ref.key, path, metadata, "image/jpeg")
    calls.clear()
    late_filled = files.index.prepare([], unsettled=False, again=True)
    assert late_filled.blobs_marked == 3 and calls["HeadObject"] == 3, calls
    chosen, _ = plan(settings, files, mode="all")
    assert chosen == sorted(everything + [ref.sha256 for ref, _ in late])


def test_a_killed_run_on_a_bucket_resumes_and_submits_nothing_twice(
    nodes: Nodes, tmp_path: Path
) -> None:
    a, b = nodes
    files = open_shared_files(a.settings())
    for seed in range(80, 86):
        path = noisy_png(tmp_path / f"{seed}.png", seed)
        data = path.read_bytes()
        ref = BlobRef(hashlib.sha256(data).hexdigest(), MediaKind.IMAGE, ".png", len(data))
        assert files.blobs.put(ref, path, "image/png")
    client = killed_at_high_water(a.env(**HIGH_WATER_2), a.broker.url)
    try:
        client.delete("mcp-media:reprocess:image")  # what its expiry would do in 30 s
        b.start_worker("vision")
        resumed = a.cli_json("reprocess", "--kind", "image", "--all")
        assert (resumed["resumed"], resumed["total"], resumed["done"]) == (2, 4, 4), resumed
        deadline = time.monotonic() + 60
        while a.fake.request_count < 6 and time.monotonic() < deadline:
            time.sleep(0.1)  # the two the killed run submitted finish on their own
        assert a.fake.request_count == 6  # each image once
    finally:
        client.close()
