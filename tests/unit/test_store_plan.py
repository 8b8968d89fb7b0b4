"""The plan's parts in bounded memory: the external sort of a folder's names, the
merge-join of sorted lists, and the local cache as its own index."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.cache import MediaCache
from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Sidecars, Status
from workers.files.blobs import BlobRef
from workers.files.index_layout import Indexed, input_marker, inputs_prefix, parse_input
from workers.files.sorted_join import with_settled
from workers.files.sorted_names import sorted_names
from workers.files.store_index import LocalIndex

pytestmark = pytest.mark.unit


@dataclass(frozen=True, slots=True)
class Item:
    sha256: str


def sha(n: int) -> str:
    return f"{n:064x}"


def peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_sorted_names_sorts_in_runs_and_merges_them(tmp_path: Path) -> None:
    rng = random.Random(7)
    names = [f"{rng.getrandbits(256):064x}.png" for _ in range(5000)] + ["a" * 64 + ".png"] * 2
    rng.shuffle(names)
    # 50 names a run and 4 runs a merge: three levels of merging, duplicates kept.
    assert list(sorted_names(iter(names), run=50, fan_in=4)) == sorted(names)
    assert list(sorted_names(iter(names[:10]), run=50)) == sorted(names[:10])
    assert list(sorted_names(iter([]))) == []


def test_sorted_names_holds_one_run_however_many_names() -> None:
    def names(count: int) -> Iterator[str]:
        rng = random.Random(count)
        return (f"{rng.getrandbits(256):064x}.jpg" for _ in range(count))

    def drain(count: int) -> None:
        last = ""
        for name in sorted_names(names(count), run=2000, fan_in=16):
            assert name >= last
            last = name

    small, large = peak_bytes(lambda: drain(20_000)), peak_bytes(lambda: drain(200_000))
    # Ten times the names, not ten times the memory (a list of them would be about 25 MB).
    assert large < 2 * small + 1_000_000, (small, large)
    assert large < 4_000_000, large


def test_the_join_marks_what_has_a_settled_result() -> None:
    rng = random.Random(3)
    everything = sorted(rng.sample(range(1 << 30), 3000))
    inputs = [sha(n) for n in everything[:2000]]
    results = sorted(set(rng.sample(inputs, 900)) | {sha(n) for n in everything[2000:2300]})
    unsettled = sorted(rng.sample(results, 200))
    joined = list(with_settled((Item(s) for s in inputs), iter(results), iter(unsettled)))
    assert [item.sha256 for item, _ in joined] == inputs
    settled = set(results) - set(unsettled)
    assert {item.sha256 for item, done in joined if done} == settled & set(inputs)
    plain = with_settled((Item(s) for s in inputs), iter(results))
    assert {item.sha256 for item, done in plain if done} == set(results) & set(inputs)


def test_the_join_reads_its_lists_in_step_in_bounded_memory() -> None:
    def join(count: int) -> None:
        inputs = (Item(sha(n)) for n in range(0, 2 * count, 2))
        results = (sha(n) for n in range(0, 2 * count, 3))
        unsettled = (sha(n) for n in range(0, 2 * count, 9))
        assert sum(1 for _item, done in with_settled(inputs, results, unsettled) if done) > 0

    small, large = peak_bytes(lambda: join(10_000)), peak_bytes(lambda: join(300_000))
    assert large < small + 100_000, (small, large)


def test_a_marker_name_carries_what_a_plan_needs() -> None:
    ref = BlobRef(sha(5), MediaKind.IMAGE, ".webp", 1234)
    name = input_marker(ref, 1_700_000_000.7)[len(inputs_prefix(MediaKind.IMAGE)) :]
    assert parse_input(name) == Indexed(sha(5), ".webp", 1234, 1_700_000_000.0)
    no_ext = input_marker(BlobRef(sha(6), MediaKind.AUDIO, "", 9), 5)
    assert parse_input(no_ext[len(inputs_prefix(MediaKind.AUDIO)) :]) == Indexed(sha(6), "", 9, 5)
    assert parse_input("not-a-marker") is None
    assert parse_input(sha(7) + ".x.y.png") is None


def test_the_local_cache_lists_its_inputs_in_order_from_any_point(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "cache")
    folder = cache.folder(MediaKind.IMAGE)
    folder.mkdir(parents=True)
    names = [sha(n) for n in random.Random(1).sample(range(10_000), 300)]
    for name in names:
        (folder / f"{name}.png").write_bytes(b"x")
    (folder / ".tmp-123").write_bytes(b"")  # a write in progress is no input
    cache.mark_output(names[0])
    results = tmp_path / "results"
    files = Sidecars(results)
    ordered = sorted(names[1:])
    for name, status in ((ordered[5], Status.DONE), (ordered[6], Status.FAILED)):
        files.write(Envelope(status, ResultKey(Capability.VISION_SUMMARIZE, "0a1b", name), {}))
    index = LocalIndex(cache, results)
    assert [i.sha256 for i in index.inputs(MediaKind.IMAGE)] == ordered
    assert [i.sha256 for i in index.inputs(MediaKind.IMAGE, ordered[99])] == ordered[100:]
    assert list(index.results(Capability.VISION_SUMMARIZE, "0a1b")) == ordered[5:7]
    assert list(index.results(Capability.VISION_SUMMARIZE, "0a1b", ordered[5])) == ordered[6:7]
    assert list(index.unsettled(Capability.VISION_SUMMARIZE, "0a1b")) == [ordered[6]]
    listed = index.listed(MediaKind.IMAGE, Indexed(ordered[0], ".png"))
    assert listed is not None and listed.path == folder / f"{ordered[0]}.png"
    assert listed.ref.size == 1
    assert index.listed(MediaKind.IMAGE, Indexed(sha(99_999), ".png")) is None
