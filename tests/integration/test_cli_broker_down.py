"""The CLI with its broker gone: every command that needs it says so in one line and exits 75
(try again later) within the API's broker timeouts, and `ingest` still prints the agent text
(fail-open). A `speak` given `--wait 0` only submits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_vision_jobs import noisy_png
from tests.support.cluster import Cluster, write_result
from tests.support.factories import image_block
from tests.support.net import free_port

pytestmark = pytest.mark.integration

ONE_LINE = "mcp-media: error: the broker does not answer"


def test_a_gone_broker_is_one_line_and_exit_75(cluster: Cluster, tmp_path: Path) -> None:
    gone = {"MCP_MEDIA_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    clip = tmp_path / "a.wav"
    clip.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28))
    for command in (
        ("speak", "Hello there."),
        ("transcribe", str(clip), "--wait", "5"),
        ("status",),
        ("result", "a" * 64),
    ):
        proc = cluster.cli(*command, timeout=60, **gone)  # bounded: no 35 s ride-out
        assert proc.returncode == 75, (command, proc.returncode, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(ONE_LINE), (command, proc.stderr)
        assert "Traceback" not in proc.stderr

    png = noisy_png(tmp_path / "a.png", 3)
    blocks = [{"type": "text", "text": "The report is in."}, image_block(png.read_bytes())]
    ingested = cluster.cli(
        "ingest", str(write_result(tmp_path / "r.json", blocks)), timeout=60, **gone
    )
    assert ingested.returncode == 0, ingested.stderr
    assert ingested.stdout.startswith("The report is in.\nMEDIA:"), ingested.stdout
    assert "no jobs submitted (broker_unavailable)" in ingested.stderr


def test_speak_with_wait_0_only_submits(cluster: Cluster) -> None:
    submitted = cluster.cli_json("speak", "Nobody serves the tts queue yet.", "--wait", "0")
    assert submitted["status"] == "pending" and submitted["path"] is None, submitted
    assert cluster.cli_json("result", submitted["id"])["status"] == "pending"
