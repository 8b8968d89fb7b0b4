"""The corpus's hostile documents (tests/corpus/documents.py) through the digest stage's real
reader child: each ends in the outcome code its case names, within the child's memory, with
no Markdown left for a failure, and the same reader digests a good document right after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipelines.digest import DigestConfig, markdown_path
from pipelines.results import Status
from tests.corpus import build, documents
from tests.support.digests import digest_bytes

pytestmark = pytest.mark.integration

EXPECTED: dict[str, dict[str, Any]] = json.loads(build.EXPECTED_FILE.read_text())
NAMES = sorted(n for n, e in EXPECTED.items() if e.get("stage") == "document_digest")


def test_every_hostile_kind_of_document_is_in_the_corpus() -> None:
    assert len(NAMES) == len(documents.CASES) >= 6
    outcomes = {EXPECTED[n]["outcome"] for n in NAMES}
    assert outcomes >= {"done", "encrypted_document", "unreadable_document", "document_too_large"}


@pytest.mark.parametrize("name", NAMES)
def test_a_hostile_document_ends_in_its_outcome_and_the_next_is_read(
    name: str, tmp_path: Path
) -> None:
    expect = EXPECTED[name]
    config = DigestConfig()
    got = digest_bytes(tmp_path, expect["document"], build.CASES[name].build(), config)
    if expect["outcome"] == "done":
        assert got.status is Status.DONE, got.reason
        out = got.output
        assert all(said in out["excerpt"] for said in expect.get("text_has", []))
        assert out["pages_read"] == expect.get("pages_read", out["pages_read"])
        assert out["peak_kib"] <= expect["max_rss_mib"] * 1024, out["peak_kib"]
    else:
        assert (got.status, got.outcome) == (Status.DEGRADED, expect["outcome"]), got.reason
        assert all(said in (got.reason or "") for said in expect.get("reason_has", []))
        assert not markdown_path(tmp_path / expect["document"]).exists()
    after = digest_bytes(tmp_path, "after.pdf", documents.good_pdf(), config)
    assert after.status is Status.DONE and documents.SENTENCE in after.output["excerpt"]
