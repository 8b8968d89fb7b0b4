"""`mcp-media doctor` against real parts: a redis-server with a worker, one that is down, a
vision endpoint that answers and one that does not, and an upstream MCP server it starts."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.net import free_port
from workers.core.capabilities import QUEUES

pytestmark = pytest.mark.integration

TOOLS_ONLY = [sys.executable, "-m", "tests.support.tools_upstream"]


def lines(stdout: str) -> dict[str, str]:
    """Each verdict line by its topic: {"broker": "OK ..."}."""
    found = {}
    for line in stdout.splitlines():
        verdict, _, rest = line.partition("  ")
        if verdict.strip() in ("OK", "WARN", "FAIL"):
            topic, _, said = rest.strip().partition("  ")
            found[topic] = f"{verdict.strip()} {said.strip()}"
    return found


def test_a_working_set_up_with_an_upstream_exits_zero(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start_worker("vision", concurrency=1)
    hermes = tmp_path / "hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("mcp_discovery_timeout: 7\nmcp_servers: {}\n")
    done = cluster.cli("doctor", "--", *TOOLS_ONLY, HERMES_HOME=str(hermes))
    assert done.returncode == 0, (done.stdout, done.stderr)  # warnings only
    said = lines(done.stdout)
    assert said["broker"].startswith("WARN "), done.stdout
    assert said["broker"].endswith(
        "answers; 1 worker(s) announce themselves; no worker takes "
        + ", ".join(q for q in QUEUES if q != "vision")
    )
    unserved = ",".join(q for q in QUEUES if q != "vision")
    assert f"fix: mcp-media worker --queues {unserved}\n" in done.stdout
    assert said["store"] == f"OK {cluster.home}: writable"
    # The fake endpoint answers (its /models is a 404: no list to check the model against).
    assert said["vision"].startswith(f"OK {cluster.fake.base_url} answers; model fake-vision")
    assert said["upstream"].startswith("OK ") and said["upstream"].endswith(", 4 tools")
    assert said["proxy"].startswith("OK ready in "), said["proxy"]
    assert "(4 upstream + our own)" in said["proxy"]
    # Timed, against the value hermes' own config sets.
    discovery = said["hermes discovery"]
    assert discovery.split()[0] in ("OK", "WARN") and "proxy's tools came after" in discovery
    assert f"mcp_discovery_timeout (7 s in {hermes / 'config.yaml'})" in discovery
    assert said["hermes speech"].startswith("WARN serve waits up to 300 s")


def test_a_broker_that_is_down_fails_within_its_bound(cluster: Cluster) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    done = cluster.cli("doctor", timeout=60, MCP_MEDIA_REDIS_URL=down)
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = lines(done.stdout)
    assert said["broker"].startswith(f"FAIL {down}: no answer"), done.stdout
    assert "fix: start it, or unset MCP_MEDIA_REDIS_URL" in done.stdout
    # The rest is still judged: one part down does not hide the others.
    assert said["store"].startswith("OK ") and said["vision"].startswith("OK ")
    assert "Traceback" not in done.stderr


def test_a_vision_endpoint_that_is_down_fails_and_names_the_fallback(cluster: Cluster) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    done = cluster.cli("doctor", timeout=60, MCP_MEDIA_VISION__BASE_URL=down)
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = lines(done.stdout)
    assert said["vision"].startswith(f"FAIL {down}: no answer"), done.stdout
    assert "unset MCP_MEDIA_VISION__BASE_URL for local summaries" in done.stdout
    without_model = cluster.cli("doctor", MCP_MEDIA_VISION__MODEL="", timeout=60)
    assert lines(without_model.stdout)["vision"].startswith("WARN "), without_model.stdout
    assert "set MCP_MEDIA_VISION__MODEL" in without_model.stdout


def test_an_upstream_that_is_not_an_mcp_server_fails(cluster: Cluster) -> None:
    done = cluster.cli("doctor", "--upstream-timeout", "20", "--", sys.executable, "-c", "pass")
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = lines(done.stdout)
    assert said["upstream"].startswith("FAIL "), done.stdout
    assert "proxy" not in said
    # nothing was timed: hermes' discovery is not judged OK on a proxy that never listed
    assert said["hermes discovery"].startswith("WARN "), done.stdout


def test_without_a_broker_jobs_run_in_process(cluster: Cluster) -> None:
    done = cluster.cli("doctor", MCP_MEDIA_REDIS_URL="", MCP_MEDIA_VISION__BASE_URL="", timeout=60)
    said = lines(done.stdout)
    assert said["broker"].startswith("OK none known"), done.stdout
    assert said["vision"].startswith("OK no endpoint"), done.stdout


def test_a_host_that_never_answers_is_a_line_not_a_hang(cluster: Cluster) -> None:
    """A port that takes connections and never answers (the kernel accepts them into the
    backlog): the broker's ping and the vision endpoint's request each end at --timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        done = cluster.cli(
            "doctor",
            "--timeout",
            "1",
            timeout=60,
            MCP_MEDIA_REDIS_URL=f"redis://127.0.0.1:{port}/0",
            MCP_MEDIA_VISION__BASE_URL=f"http://127.0.0.1:{port}/v1",
        )
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = lines(done.stdout)
    assert said["broker"].startswith(f"FAIL redis://127.0.0.1:{port}/0: no answer ("), done.stdout
    assert said["broker"].endswith("waited up to 1 s)"), done.stdout
    assert said["vision"].startswith(f"FAIL http://127.0.0.1:{port}/v1: no answer ("), done.stdout
