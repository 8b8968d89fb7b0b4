"""Blob references, the local blob store, this node's cache of blobs (fetch, hash check,
pruning of replicas only) and the store settings read from the standard AWS variables."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.cache import MediaCache
from pipelines.errors import PermanentError
from pipelines.media import BlobError, MediaKind
from tests.support.factories import png_bytes
from workers.core.settings import Settings
from workers.files.blobs import BlobMissing, BlobRef, Listed, LocalBlobs
from workers.files.node_cache import REPLICAS, NodeCache, input_ref
from workers.files.s3 import Location
from workers.files.store_index import LocalIndex

pytestmark = pytest.mark.unit

PNG_1x1 = png_bytes((1, 1))


class MemoryBlobs:
    """A remote blob store held in memory: the twin of `S3Blobs` for unit tests."""

    remote = True

    def __init__(self) -> None:
        self.objects: dict[str, tuple[BlobRef, bytes, bool]] = {}
        self.reads = 0

    def describe(self) -> str:
        return "memory://blobs"

    def check(self) -> None:
        return None

    def has(self, ref: BlobRef) -> bool:
        return ref.sha256 in self.objects

    def put(
        self, ref: BlobRef, source: Path, mime: str | None = None, output: bool = False
    ) -> bool:
        if ref.sha256 in self.objects:
            return False
        self.objects[ref.sha256] = (ref, source.read_bytes(), output)
        return True

    def chunks(self, ref: BlobRef) -> Iterator[bytes]:
        if ref.sha256 not in self.objects:
            raise BlobMissing(f"blob {ref.sha256} is not in {self.describe()}")
        self.reads += 1
        data = self.objects[ref.sha256][1]
        return iter([data[:10], data[10:]])

    def close(self) -> None:
        return None


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_ref_round_trips_and_refuses_what_is_not_one() -> None:
    ref = BlobRef(sha(b"x"), MediaKind.IMAGE, ".png", 1)
    assert BlobRef.from_json(ref.to_json()) == ref
    assert ref.key == f"blobs/sha256/{ref.sha256[:2]}/{ref.sha256}"
    bad_refs: list[dict[str, object]] = [
        {"sha256": "../../etc/passwd", "kind": "image", "ext": ".png", "size": 1},
        {"sha256": sha(b"x"), "kind": "video", "ext": ".png", "size": 1},
        {"sha256": sha(b"x"), "kind": "image", "ext": "/../x", "size": 1},
        {"sha256": sha(b"x"), "kind": "image", "ext": ".png", "size": "1"},
        {"sha256": sha(b"x"), "kind": "image", "ext": ".png", "size": -1},
        {"sha256": sha(b"x"), "kind": "image", "ext": ".png", "size": 1, "text": 5},
        {"kind": "image"},
    ]
    for bad in bad_refs:
        with pytest.raises(PermanentError):
            BlobRef.from_json(bad)


def test_a_small_document_travels_as_text(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "cache")
    request = b'{"text": "hello", "voice": null}'
    stored = cache.store_bytes(request, MediaKind.DOCUMENT, name="speech-request.json")
    ref = input_ref(MediaKind.DOCUMENT, stored.path, stored.sha256)
    assert ref.text == request.decode()
    image = cache.store_bytes(PNG_1x1, MediaKind.IMAGE)
    assert input_ref(MediaKind.IMAGE, image.path, image.sha256).text is None
    # Another node without the file writes it from the message, checked against its hash.
    other = NodeCache(MediaCache(tmp_path / "other"), MemoryBlobs(), 1 << 20)
    path = other.local(ref)
    assert path.read_bytes() == request and path.is_relative_to(tmp_path / "other")
    forged = BlobRef(ref.sha256, MediaKind.DOCUMENT, ".json", ref.size, text='{"text": "evil"}')
    with pytest.raises(BlobError, match="arrived with other bytes"):
        NodeCache(MediaCache(tmp_path / "third"), MemoryBlobs(), 1 << 20).local(forged)


def test_local_blobs_are_the_cache_itself(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "cache")
    stored = cache.store_bytes(PNG_1x1, MediaKind.IMAGE)
    blobs = LocalBlobs(cache)
    ref = BlobRef(stored.sha256, MediaKind.IMAGE, ".png", stored.size)
    assert blobs.has(ref) and b"".join(blobs.chunks(ref)) == PNG_1x1
    index = LocalIndex(cache, tmp_path / "results")  # the cache's folders are its index
    assert [index.listed(MediaKind.IMAGE, i) for i in index.inputs(MediaKind.IMAGE)] == [
        Listed(ref, stored.path.stat().st_mtime, stored.path)
    ]
    node = NodeCache(cache, blobs, 1 << 20)
    assert node.local(ref) == stored.path
    missing = BlobRef(sha(b"nobody"), MediaKind.IMAGE, ".png", 6)
    with pytest.raises(BlobMissing, match="is not in the local cache"):
        node.local(missing)


def test_a_fetched_blob_is_hash_checked_and_kept_as_a_replica(tmp_path: Path) -> None:
    remote = MemoryBlobs()
    source = tmp_path / "a.png"
    source.write_bytes(PNG_1x1)
    ref = BlobRef(sha(PNG_1x1), MediaKind.IMAGE, ".png", len(PNG_1x1))
    remote.put(ref, source)
    node = NodeCache(MediaCache(tmp_path / "node"), remote, 1 << 20, replicas=True)
    path = node.local(ref)
    assert path.read_bytes() == PNG_1x1 and path.name == f"{ref.sha256}.png"
    assert (tmp_path / "node" / REPLICAS / ref.sha256).exists()
    assert node.local(ref) == path and remote.reads == 1  # the second time from the disk
    # Bytes that do not hash to the name are refused and nothing is published.
    lying = BlobRef(sha(b"other bytes"), MediaKind.IMAGE, ".png", len(PNG_1x1))
    remote.objects[lying.sha256] = (lying, PNG_1x1, False)
    with pytest.raises(BlobError, match="arrived with other bytes"):
        node.local(lying)
    assert not list((tmp_path / "node" / "images").glob(f"{lying.sha256}*"))
    # A local copy that was altered is not trusted: it is fetched again.
    remote.reads = 0
    path.write_bytes(bytes(len(PNG_1x1)))  # the same size, other bytes
    assert node.local(ref).read_bytes() == PNG_1x1 and remote.reads == 1


def test_prune_drops_old_replicas_only(tmp_path: Path) -> None:
    remote = MemoryBlobs()
    cache = MediaCache(tmp_path / "node")
    own = cache.store_bytes(PNG_1x1 + b"own", MediaKind.IMAGE)  # an agent's: never pruned
    refs = []
    for n in range(4):
        data = PNG_1x1 + bytes([n]) * 1000
        src = tmp_path / f"{n}.png"
        src.write_bytes(data)
        ref = BlobRef(sha(data), MediaKind.IMAGE, ".png", len(data))
        remote.put(ref, src)
        refs.append(ref)
    node = NodeCache(cache, remote, 10**9, replicas=True)
    paths = [node.local(ref) for ref in refs]
    old = time.time() - 3600
    for n, path in enumerate(paths[:3]):
        os.utime(path, (old + n, old + n))
    os.utime(own.path, (old - 10, old - 10))
    node.budget = paths[3].stat().st_size + own.size + 10
    freed = node.prune()
    assert freed > 0
    assert own.path.exists() and paths[3].exists()  # not a replica; used just now
    assert not any(path.exists() for path in paths[:3])
    assert node.local(refs[0]).exists()  # fetched again when a job needs it


def test_a_node_on_one_machine_never_prunes(tmp_path: Path) -> None:
    cache = MediaCache(tmp_path / "cache")
    stored = cache.store_bytes(PNG_1x1, MediaKind.IMAGE)
    node = NodeCache(cache, LocalBlobs(cache), 1, replicas=True)
    os.utime(stored.path, (0, 0))
    assert node.prune() == 0 and stored.path.exists()


def test_store_settings_read_the_standard_aws_variables() -> None:
    settings = Settings.from_env(
        {
            "MCP_MEDIA_STORE__URL": "s3://media/team-a",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
            "AWS_ACCESS_KEY_ID": "id",
            "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_DEFAULT_REGION": "eu-west-1",
        }
    )
    store = settings.store
    assert store.url == "s3://media/team-a"
    assert (store.endpoint_url, store.access_key_id, store.region) == (
        "http://127.0.0.1:8333",
        "id",
        "eu-west-1",
    )
    assert store.secret_access_key.get_secret_value() == "secret"
    assert "SecretStr('secret')" not in repr(settings)
    # Our own variable wins over the AWS one; AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL.
    chosen = Settings.from_env(
        {
            "AWS_ENDPOINT_URL": "http://a",
            "AWS_ENDPOINT_URL_S3": "http://b",
            "AWS_REGION": "us-west-2",
            "MCP_MEDIA_STORE__REGION": "ap-south-1",
        }
    ).store
    assert (chosen.endpoint_url, chosen.region, chosen.url) == ("http://b", "ap-south-1", None)
    assert Settings.from_env({"MCP_MEDIA_STORE__URL": ""}).store.url is None


def test_a_store_url_that_is_not_s3_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="s3://BUCKET"):
        Settings.from_env({"MCP_MEDIA_STORE__URL": "/mnt/shared"})
    assert Location.parse("s3://media") == Location("media", "")
    assert Location.parse("s3://media/a/b/") == Location("media", "a/b/")
    assert str(Location.parse("s3://media/a")) == "s3://media/a/"
