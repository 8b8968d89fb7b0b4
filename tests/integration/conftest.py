"""Integration tests use the `broker`, `fake_openai` and `cluster` fixtures of tests/conftest.py."""

from tests.support.cluster import ROOT, Cluster, Worker, write_result

__all__ = ["ROOT", "Cluster", "Worker", "write_result"]
