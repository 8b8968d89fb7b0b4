"""Single files from the command line into the cache (describe, transcribe)."""

from __future__ import annotations

from pathlib import Path

from pipelines.errors import PermanentError
from pipelines.ingest import validate_image
from pipelines.media import BlobError, MediaKind, StoredBlob
from pipelines.sniff import Format
from workers.core.settings import Settings


def store_file(settings: Settings, path: Path, kind: str) -> StoredBlob:
    media_kind = MediaKind(kind)
    if not path.is_file():
        raise PermanentError(f"{path}: no such file")

    def validate(tmp: Path, head: bytes) -> Format:
        return validate_image(tmp, head, name=repr(str(path)))  # the user's file, not the temp

    try:
        return settings.media_cache().store_file(
            path, media_kind, validate=validate if media_kind is MediaKind.IMAGE else None
        )
    except BlobError as exc:
        raise PermanentError(f"{path}: {exc.message}") from None
