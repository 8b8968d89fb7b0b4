"""The one Settings object: environment prefix MCP_MEDIA_, nested sections with `__`."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipelines.cache import DEFAULT_MAX_BLOB_BYTES, CacheLimits, MediaCache


def default_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "mcp-media"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MCP_MEDIA_", env_nested_delimiter="__", extra="ignore"
    )

    home: Path = Field(default_factory=default_home)
    redis_url: str | None = None
    max_blob_bytes: int = Field(default=DEFAULT_MAX_BLOB_BYTES, gt=0)

    @property
    def cache_root(self) -> Path:
        return self.home / "cache"

    def media_cache(self) -> MediaCache:
        return MediaCache(self.cache_root, CacheLimits(max_blob_bytes=self.max_blob_bytes))
