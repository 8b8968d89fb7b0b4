"""What every node of a cluster must share, besides Redis: blobs, result sidecars and the
job journal. In the home on one machine (or one mounted volume); in an S3 bucket when
MCP_MEDIA_STORE__URL names one. (What the nodes share through Redis is
`workers.state.shared_state`.)"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.results import ResultFiles
from workers.core.settings import Settings
from workers.files.blobs import BlobStore, LocalBlobs
from workers.files.journal import JobJournal, Journal
from workers.files.store_index import LocalIndex, StoreIndex


@dataclass(frozen=True, slots=True)
class SharedFiles:
    blobs: BlobStore
    sidecars: ResultFiles
    journal: JobJournal
    index: StoreIndex  # what is stored, by kind and version, for planning a reprocess

    @property
    def shared_nothing(self) -> bool:
        """True: nodes share only Redis and the bucket; a path means nothing elsewhere."""
        return self.blobs.remote


def open_shared_files(settings: Settings) -> SharedFiles:
    """The shared files the settings name (no network call: `check()` the blobs at start)."""
    if settings.store.url is None:
        cache = settings.media_cache()
        return SharedFiles(
            LocalBlobs(cache),
            settings.sidecars(),
            Journal(settings.home / "jobs"),
            LocalIndex(cache, settings.results_root),
        )
    from workers.files.s3 import S3Blobs, S3Bucket, S3Journal, S3Sidecars
    from workers.files.s3_index import S3Index

    bucket = S3Bucket(settings.store)
    return SharedFiles(S3Blobs(bucket), S3Sidecars(bucket), S3Journal(bucket), S3Index(bucket))
