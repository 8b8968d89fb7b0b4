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


@dataclass(frozen=True, slots=True)
class SharedFiles:
    blobs: BlobStore
    sidecars: ResultFiles
    journal: JobJournal

    @property
    def shared_nothing(self) -> bool:
        """True: nodes share only Redis and the bucket; a path means nothing elsewhere."""
        return self.blobs.remote


def open_shared_files(settings: Settings) -> SharedFiles:
    """The shared files the settings name (no network call: `check()` the blobs at start)."""
    if settings.store.url is None:
        return SharedFiles(
            LocalBlobs(settings.media_cache()), settings.sidecars(), Journal(settings.home / "jobs")
        )
    from workers.files.s3 import S3Blobs, S3Bucket, S3Journal, S3Sidecars

    bucket = S3Bucket(settings.store)
    return SharedFiles(S3Blobs(bucket), S3Sidecars(bucket), S3Journal(bucket))
