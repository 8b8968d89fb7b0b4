"""Processing stages as plain Python: no Celery, no settings reads."""

from pipelines.cache import CacheLimits, MediaCache
from pipelines.ingest import ingest
from pipelines.render import RenderedResult

__all__ = ["CacheLimits", "MediaCache", "RenderedResult", "ingest"]
