"""One document reader for the digest tests of this process (its children serve every test
and end when the tests do), and a digest of bytes the test wrote."""

from __future__ import annotations

import atexit
from pathlib import Path

from pipelines.digest import DigestConfig, digest_document
from pipelines.engines.registry import document_extractor
from pipelines.results import StageOutcome

READER = document_extractor()
atexit.register(READER.close)


def digest_bytes(folder: Path, name: str, data: bytes, config: DigestConfig) -> StageOutcome:
    path = folder / name
    path.write_bytes(data)
    return digest_document(path, config, READER)
