from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines import MediaCache, ingest
from pipelines.cache import CacheLimits
from pipelines.media import MediaKind
from pipelines.names import MAX_NAME_CHARS, safe_document_name

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///tmp/../../etc/passwd", "passwd"),
        ("x://h/a/..%2f..%2fetc%2fpasswd", "passwd"),
        ("x://h/a/%252e%252e%252fsecret.txt", "secret.txt"),
        ("/etc/shadow", "shadow"),
        ("C:\\Windows\\System32\\evil.dll", "evil.dll"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("x://h/..", "resource.pdf"),
        ("x://h/", "resource.pdf"),
        ("x://h/.", "resource.pdf"),
        ("x://h/re%00port\n.pdf", "report.pdf"),
        ("x://h/inv\u202eoice\u200b.pdf", "invoice.pdf"),
        ("x://h/CON.txt", "_CON.txt"),
        ("x://h/lpt1", "_lpt1"),
        ("x://h/a<b>c:d|e*.txt", "abcde.txt"),
    ],
)
def test_hostile_names_are_neutralised(uri: str, expected: str) -> None:
    assert safe_document_name(uri, None, "application/pdf") == expected


def test_long_name_is_capped_keeping_the_extension() -> None:
    name = safe_document_name("x://h/" + "a" * 400 + ".xlsx", None, None)
    assert len(name) == MAX_NAME_CHARS
    assert name.endswith(".xlsx")


def test_name_falls_back_to_the_given_name_then_mime() -> None:
    assert safe_document_name("x://h/", "report.csv", "text/csv") == "report.csv"
    assert safe_document_name(None, None, "text/csv") == "resource.csv"
    assert safe_document_name(None, None, None) == "resource.bin"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(uri=st.text(max_size=600), name=st.one_of(st.none(), st.text(max_size=300)))
def test_any_uri_and_name_stays_inside_the_cache(
    tmp_path: Path, uri: str, name: str | None
) -> None:
    cache = MediaCache(tmp_path / "cache", CacheLimits(max_blob_bytes=1024))
    stored = cache.store_bytes(b"%PDF", MediaKind.DOCUMENT, uri=uri, name=name)
    root = os.path.realpath(cache.root)
    assert os.path.realpath(stored.path).startswith(root + os.sep)
    assert len(stored.path.name) <= MAX_NAME_CHARS
    assert stored.path.read_bytes() == b"%PDF"
    assert stored.path.parent.parent == cache.root / "documents"


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(uri=st.text(max_size=200))
def test_any_uri_through_ingest_never_raises(tmp_path: Path, uri: str) -> None:
    cache = MediaCache(tmp_path / "cache")
    out = ingest(
        {"content": [{"type": "resource", "resource": {"uri": uri, "blob": "JVBERg=="}}]},
        cache=cache,
    )
    for media in out.media:
        assert os.path.realpath(media.path).startswith(os.path.realpath(cache.root) + os.sep)


@pytest.mark.parametrize(
    ("uri", "stored"),
    [
        ("file:///x/[[audio_as_voice]].pdf", "((audio_as_voice)).pdf"),
        ("file:///x/%EF%BC%BB%EF%BC%BBa%EF%BC%BD%EF%BC%BD.pdf", "((a)).pdf"),  # full-width
        ("file:///x/ＭＥＤＩＡ：etc.pdf", "ＭＥＤＩＡetc.pdf"),  # the full-width colon goes
        ("file:///x/report (1).pdf", "report (1).pdf"),
    ],
)
def test_stored_names_carry_no_agent_directive(uri: str, stored: str) -> None:
    assert safe_document_name(uri, None, None) == stored
