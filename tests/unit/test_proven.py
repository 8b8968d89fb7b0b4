"""A blob its validator proved is not written, synced or checked again while its file is here."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from pipelines.cache import MediaCache, Validator
from pipelines.ingest import NeedsWork, ingest, validate_image
from pipelines.media import BlobError, MarkerReason, MediaKind, StoredBlob
from pipelines.proven import ProvenFormats, hold
from pipelines.sniff import Format
from tests.conftest import files_under
from tests.support.factories import png_bytes

pytestmark = pytest.mark.unit


class Counting:
    """ingest's image check, counting the times it runs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path: Path, head: bytes) -> Format:
        self.calls += 1
        return validate_image(path, head)


def store(
    cache: MediaCache, data: bytes, check: Validator, proven: ProvenFormats | None
) -> StoredBlob:
    text = base64.b64encode(data).decode()
    return cache.store_base64(
        text, MediaKind.IMAGE, mime="image/png", validate=check, proven=proven
    )


def test_a_proven_blob_already_here_is_returned_without_checking_it_again(tmp_path: Path) -> None:
    cache, check, proven = MediaCache(tmp_path / "c"), Counting(), ProvenFormats()
    data = png_bytes((64, 48))
    first = store(cache, data, check, proven)
    again = store(cache, data, check, proven)
    assert check.calls == 1
    assert again == first
    assert first.sha256 == hashlib.sha256(data).hexdigest()
    assert first.path.read_bytes() == data
    assert files_under(cache.root) == [first.path]  # no temp file left behind


def test_without_proven_formats_every_store_checks_the_bytes(tmp_path: Path) -> None:
    cache, check = MediaCache(tmp_path / "c"), Counting()
    data = png_bytes((64, 48))
    store(cache, data, check, None)
    store(cache, data, check, None)
    assert check.calls == 2


def test_a_proven_blob_whose_file_is_gone_is_written_again(tmp_path: Path) -> None:
    cache, check, proven = MediaCache(tmp_path / "c"), Counting(), ProvenFormats()
    data = png_bytes((64, 48))
    first = store(cache, data, check, proven)
    first.path.unlink()
    again = store(cache, data, check, proven)
    assert again.path == first.path
    assert again.path.read_bytes() == data
    assert check.calls == 1  # the same bytes: proved once is enough


@pytest.mark.parametrize("damage", ["truncated", "symlink"])
def test_a_damaged_or_planted_file_is_replaced_not_trusted(tmp_path: Path, damage: str) -> None:
    cache, check, proven = MediaCache(tmp_path / "c"), Counting(), ProvenFormats()
    data = png_bytes((64, 48))
    first = store(cache, data, check, proven)
    if damage == "truncated":
        first.path.write_bytes(data[:10])
    else:
        outside = tmp_path / "outside.png"
        outside.write_bytes(data)
        first.path.unlink()
        first.path.symlink_to(outside)
    again = store(cache, data, check, proven)
    assert not again.path.is_symlink()
    assert again.path.read_bytes() == data


def test_a_refused_blob_is_checked_again_every_time(tmp_path: Path) -> None:
    cache, check, proven = MediaCache(tmp_path / "c"), Counting(), ProvenFormats()
    broken = png_bytes((64, 48))[:60]  # a PNG header, then nothing
    for _ in range(2):
        with pytest.raises(BlobError) as info:
            store(cache, broken, check, proven)
        assert info.value.reason is MarkerReason.NOT_IMAGE
    assert check.calls == 2
    assert files_under(cache.root) == []


def test_proven_formats_keep_the_most_recent_entries() -> None:
    proven = ProvenFormats(entries=2)
    fmt = Format("png", ".png", "image/png")
    for name in ("a", "b"):
        proven.add(name * 64, fmt)
    assert proven.get("a" * 64) is fmt  # used: now the most recent
    proven.add("c" * 64, fmt)
    assert proven.get("b" * 64) is None
    assert proven.get("a" * 64) is fmt and proven.get("c" * 64) is fmt


def test_hold_keeps_small_blobs_and_streams_large_ones_unchanged() -> None:
    chunks = [os.urandom(100), os.urandom(100), os.urandom(100)]
    rest, held = hold(iter(chunks), budget=300)
    assert held is not None and held.size == 300
    assert held.sha256 == hashlib.sha256(b"".join(chunks)).hexdigest()
    assert list(rest) == chunks
    rest, held = hold(iter(chunks), budget=250)
    assert held is None
    assert list(rest) == chunks  # the chunks read while trying come first, then the rest


def test_find_proven_only_finds_a_proved_blob_whose_file_is_here(tmp_path: Path) -> None:
    cache, check, proven = MediaCache(tmp_path / "c"), Counting(), ProvenFormats()
    data = png_bytes((64, 48))
    text = base64.b64encode(data).decode()
    assert cache.find_proven(text, MediaKind.IMAGE, proven, 1 << 20) is None  # new: nothing
    assert files_under(cache.root) == []  # ... and nothing written
    stored = store(cache, data, check, proven)
    assert cache.find_proven(text, MediaKind.IMAGE, proven, 1 << 20) == stored
    assert cache.find_proven(text, MediaKind.IMAGE, proven, len(data) - 1) is None  # too big
    assert cache.find_proven("not base64!", MediaKind.IMAGE, proven, 1 << 20) is None
    stored.path.unlink()
    assert cache.find_proven(text, MediaKind.IMAGE, proven, 1 << 20) is None  # file gone
    assert check.calls == 1


def test_a_known_only_ingest_needs_work_for_new_bytes_and_documents(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "c")
    image = {"type": "image", "data": base64.b64encode(png_bytes((61, 47))).decode()}
    result = {"content": [{"type": "text", "text": "see"}, {**image, "mimeType": "image/png"}]}
    with pytest.raises(NeedsWork):
        ingest(result, cache=cache, known_only=True)
    assert files_under(cache.root) == []
    full = ingest(result, cache=cache)
    assert ingest(result, cache=cache, known_only=True) == full  # the same rendering, inline
    document = {
        "type": "resource",
        "resource": {"uri": "file:///a.pdf", "mimeType": "application/pdf", "blob": "JVBERg=="},
    }
    with pytest.raises(NeedsWork):
        ingest({"content": [document]}, cache=cache, known_only=True)
