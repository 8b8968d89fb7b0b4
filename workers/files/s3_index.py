"""A bucket's index for planning (`workers.files.store_index.StoreIndex`): marker objects
(`workers.files.index_layout`) listed in key order, about 1,000 a request, never one request
per blob.

Blobs and results stored before the index existed are indexed once (`prepare`): a listing
of the blobs and one HEAD each for its kind (what the old plan paid on every run), then a
mark object so no later run pays it again; `again` (`reprocess --backfill-index`) looks
again, for blobs an older node stored without a marker.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence

from pipelines.errors import PermanentError
from pipelines.media import Capability, MediaKind
from pipelines.results import Status
from workers.files.blobs import BlobRef, Listed
from workers.files.index_layout import (
    AFTER,
    INPUTS_MARK,
    Indexed,
    input_marker,
    inputs_prefix,
    output_marker,
    parse_input,
    results_prefix,
    unsettled_mark,
    unsettled_prefix,
)
from workers.files.s3 import S3Bucket, _envelope
from workers.files.sorted_join import Cursor
from workers.files.store_index import Backfilled

BLOBS = "blobs/sha256/"
SIDECAR = ".json"


class S3Index:
    def __init__(self, bucket: S3Bucket) -> None:
        self.bucket = bucket

    def prepare(
        self,
        versions: Sequence[tuple[Capability, str]],
        *,
        unsettled: bool,
        again: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> Backfilled:
        say = progress or (lambda _line: None)
        blobs_marked = results_read = unsettled_marked = 0
        if again or self.bucket.head(INPUTS_MARK) is None:
            say("indexing the blobs stored before the index (one HEAD each, once)")
            blobs_marked = self._backfill_blobs()
            self.bucket.put_bytes(INPUTS_MARK, b"")
        for capability, version in versions if unsettled else ():
            mark = unsettled_mark(capability, version)
            if not again and self.bucket.head(mark) is not None:
                continue
            say(f"indexing the results of {capability.value} {version} that are not done (once)")
            read, marked = self._backfill_unsettled(capability, version)
            results_read += read
            unsettled_marked += marked
            self.bucket.put_bytes(mark, b"")
        return Backfilled(blobs_marked, results_read, unsettled_marked)

    def _backfill_blobs(self) -> int:
        """Index each blob that has no marker yet: the blobs (listed in sha256 order, below
        `<aa>/`) are joined against every marker, so only an unindexed blob costs a HEAD."""
        marked = 0
        indexed = Cursor(
            heapq.merge(
                *(self._sha256s(inputs_prefix(kind), "") for kind in MediaKind),
                self._sha256s(OUTPUTS_PREFIX, ""),
            )
        )
        for key, modified, size in self.bucket.listing(BLOBS):
            if indexed.reaches(key.rsplit("/", 1)[-1]):
                continue
            found = self.bucket.head(key)
            if found is None:
                continue
            metadata = found["metadata"]
            try:
                kind = MediaKind(metadata.get("kind", ""))
                ref = BlobRef(key.rsplit("/", 1)[-1], kind, metadata.get("ext", ""), size)
            except (ValueError, PermanentError):
                continue  # not one of ours
            marker = output_marker(ref.sha256) if metadata.get("output") else None
            self.bucket.put_bytes(marker or input_marker(ref, modified), b"")
            marked += 1
        return marked

    def _backfill_unsettled(self, capability: Capability, version: str) -> tuple[int, int]:
        read = marked = 0
        prefix = results_prefix(capability, version)
        for key, _modified, _size in self.bucket.listing(prefix):
            raw = self.bucket.get_bytes(key)
            read += 1
            envelope = _envelope(raw) if raw is not None else None
            if envelope is not None and envelope.status is not Status.DONE:
                self.bucket.put_bytes(unsettled_prefix(capability, version) + key[-69:-5], b"")
                marked += 1
        return read, marked

    def inputs(self, kind: MediaKind, after: str = "") -> Iterator[Indexed]:
        prefix = inputs_prefix(kind)
        outputs = self._sha256s(OUTPUTS_PREFIX, after)
        output = next(outputs, None)
        last = ""
        for key, _modified, _size in self.bucket.listing(prefix, after + AFTER if after else ""):
            item = parse_input(key[len(prefix) :])
            if item is None or item.sha256 == last:
                continue  # not a marker, or a second marker of one blob (stored twice)
            last = item.sha256
            while output is not None and output < item.sha256:
                output = next(outputs, None)
            if output != item.sha256:  # a blob stored as an input, later marked ours
                yield item

    def listed(self, kind: MediaKind, item: Indexed) -> Listed | None:
        try:
            ref = BlobRef(item.sha256, kind, item.ext, item.size or 0)
        except PermanentError:
            return None
        return Listed(ref, item.stored or 0.0)

    def results(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        return self._sha256s(results_prefix(capability, version), after)

    def unsettled(self, capability: Capability, version: str, after: str = "") -> Iterator[str]:
        return self._sha256s(unsettled_prefix(capability, version), after)

    def _sha256s(self, prefix: str, after: str) -> Iterator[str]:
        """The sha256 each name under `prefix` starts with, in order."""
        for key, _modified, _size in self.bucket.listing(prefix, after + AFTER if after else ""):
            sha256 = key[len(prefix) : len(prefix) + 64]
            if len(sha256) == 64:
                yield sha256


OUTPUTS_PREFIX = output_marker("")
