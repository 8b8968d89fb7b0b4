"""Shared fixtures: every test gets its own MCP_MEDIA_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cache import CacheLimits, MediaCache


@pytest.fixture
def cache(tmp_path: Path) -> MediaCache:
    return MediaCache(tmp_path / "home" / "cache", CacheLimits(max_blob_bytes=1024 * 1024))


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())
