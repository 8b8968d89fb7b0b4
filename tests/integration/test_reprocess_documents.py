"""`mcp-media reprocess --kind document` on a real cluster: the documents a tool returned
are planned from the cache (the digest's own Markdown, speech requests and what no digest
reads left out), queued in the batch lane and digested by a real documents worker; a
changed extractor setting (a new processor version) digests them all again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pipelines import ingest
from pipelines.digest import markdown_path
from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_document_jobs import pdf_block
from tests.support.factories import b64
from tests.support.pdf_writer import build_pdf, text_pages

pytestmark = pytest.mark.integration

SENTENCE = "The ferry timetable changes with the spring tides."
COUNT = 3


def seed(cluster: Cluster) -> list[Path]:
    """Cache documents without enqueueing anything, as an older install would have left
    them: three PDFs and an archive no digest reads."""
    blocks = [
        pdf_block(build_pdf(text_pages(3, f"{SENTENCE} ({n})", at=0)), f"timetable-{n}.pdf")
        for n in range(COUNT)
    ]
    empty_zip = b"PK\x05\x06" + b"\0" * 18
    archive = {"uri": "file:///a.zip", "mimeType": "application/zip", "blob": b64(empty_zip)}
    blocks.append({"type": "resource", "resource": archive})
    rendered = ingest(json.dumps({"content": blocks}), cache=cluster.settings().media_cache())
    assert len(rendered.media) == COUNT + 1 and len(rendered.jobs) == COUNT
    return [blob.path for blob in rendered.media[:COUNT]]


def test_documents_are_digested_in_the_batch_lane_and_again_for_a_new_version(
    cluster: Cluster,
) -> None:
    pdfs = seed(cluster)
    dry = cluster.cli_json("reprocess", "--kind", "document", "--dry-run")
    assert (dry["selected"], dry["by_kind"]) == (COUNT, {"document": COUNT})

    run = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", "reprocess", "--kind", "document", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=cluster.env(),
    )
    client = redis.Redis.from_url(cluster.broker.url)
    try:
        for _ in range(600):  # no worker yet: every job waits in the batch lane (a hang guard)
            if client.llen("documents.batch") == COUNT:
                break
            time.sleep(0.05)
        assert (client.llen("documents"), client.llen("documents.batch")) == (0, COUNT)
        worker = cluster.start_worker("documents", 2)
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        done = json.loads(out)
        assert (done["total"], done["done"], done["degraded"], done["failed"]) == (
            COUNT,
            COUNT,
            0,
            0,
        )
    finally:
        if run.poll() is None:
            run.kill()
        client.close()
    for pdf in pdfs:
        whole = markdown_path(pdf).read_text(encoding="utf-8")
        assert SENTENCE in whole and "Page 3 line" in whole

    # Digested: nothing left, the Markdown beside each is no document of its own.
    again = cluster.cli_json("reprocess", "--kind", "document", "--dry-run")
    assert (again["selected"], again["skipped"]) == (0, COUNT)

    # A new extractor cap is a new processor version: every document is digested again.
    worker.stop()
    capped = {"MCP_MEDIA_DOCUMENTS__MAX_PAGES": "2"}
    cluster.start_worker("documents", 2, MCP_MEDIA_DOCUMENTS__MAX_PAGES="2")
    rerun = cluster.cli_json("reprocess", "--kind", "document", **capped)
    assert (rerun["selected"], rerun["done"]) == (COUNT, COUNT)
    for pdf in pdfs:
        whole = markdown_path(pdf).read_text(encoding="utf-8")
        assert SENTENCE in whole and "Page 3 line" not in whole
