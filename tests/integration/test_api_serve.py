"""`mcp-media serve`: the process, its key and its refusals, against a real server process."""

from __future__ import annotations

import stat

import httpx2
import pytest

from tests.integration.conftest import Cluster
from tests.support.serve import serve

pytestmark = pytest.mark.integration


def test_health_is_open_and_the_api_needs_the_generated_key(cluster: Cluster) -> None:
    with serve(cluster) as served:
        assert httpx2.get(f"{served.url}/healthz", timeout=10).json() == {"status": "ok"}
        key_file = cluster.home / "api-key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key-wrong-key"},
            {"Authorization": "x"},
        ):
            response = httpx2.get(f"{served.url}/v1/models", headers=headers, timeout=10)
            assert response.status_code == 401
            error = response.json()["error"]
            assert error["type"] == "authentication_error" and error["message"]
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert httpx2.get(f"{served.url}/metrics", timeout=10).status_code == 401


def test_a_key_from_the_environment_is_used_and_no_file_is_made(cluster: Cluster) -> None:
    key = "k" * 24
    with serve(cluster, MCP_MEDIA_API__KEY=key) as served:
        assert served.key == key
        assert not (cluster.home / "api-key").exists()
        wrong = httpx2.get(f"{served.url}/v1/models", timeout=10)
        assert wrong.status_code == 401


def test_non_loopback_without_a_key_is_refused_at_start(cluster: Cluster) -> None:
    proc = cluster.cli("serve", "--host", "0.0.0.0", "--port", "8799", timeout=60)
    assert proc.returncode == 2
    assert "without a key: set MCP_MEDIA_API__KEY" in proc.stderr


def test_a_short_key_and_a_busy_port_are_refused_in_one_line(cluster: Cluster) -> None:
    proc = cluster.cli("serve", "--port", "8798", MCP_MEDIA_API__KEY="short", timeout=60)
    assert proc.returncode == 2 and "at least 16 characters" in proc.stderr
    with serve(cluster) as served:
        port = served.url.rsplit(":", 1)[1]
        busy = cluster.cli("serve", "--port", port, timeout=60)
        assert busy.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1
