"""A document digest's text where nodes share only Redis and a bucket.

The digest job writes the document's Markdown beside its copy of the document, on the
worker's node, and shares it in the bucket (`markdown_blob`). The node that asked has its
own copy of the document: the result it hands out names a Markdown file beside that copy,
fetched once from the bucket, never a path on the worker's machine.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from pipelines.digest import markdown_path, write_beside
from pipelines.errors import PermanentError
from pipelines.results import Envelope, Status
from workers.files.blobs import BlobRef
from workers.files.node_cache import NodeCache

log = logging.getLogger(__name__)


def digest_here(node: NodeCache, envelope: Envelope, limit: int) -> Envelope:
    """`envelope` (a digest's result) with its `markdown` beside this node's copy of the
    document; without it (the excerpt only) when this node has no copy or cannot get the
    text."""
    output = envelope.output
    if envelope.status is not Status.DONE or not isinstance(output.get("markdown"), str):
        return envelope
    found = node.cache.find_document(envelope.key.sha256)
    if found is not None:
        target = markdown_path(found.path)
        if str(target) == output["markdown"] and target.is_file():
            return envelope
        if target.is_file() or _fetched(node, output.get("markdown_blob"), found.path, limit):
            return replace(envelope, output={**output, "markdown": str(target)})
    # Never another machine's path: the excerpt stands, read_document makes the text here.
    return replace(envelope, output={k: v for k, v in output.items() if k != "markdown"})


def _fetched(node: NodeCache, shared: object, original: Path, limit: int) -> bool:
    if not isinstance(shared, dict):
        return False  # a result from before the text was shared
    try:
        ref = BlobRef.from_json(shared)
    except PermanentError:
        return False
    data = node.shared_bytes(ref, limit)
    if data is None:
        return False
    try:
        write_beside(original, data.decode("utf-8", errors="replace"))
    except OSError as exc:
        log.warning("digest text of %s not saved: %s", original.name, exc)
        return False
    return True
