"""Vision configuration through the real CLI: disabled, model fallback, bad endpoints,
processor versions, the local OCR provider, and inline runs deduplicated by sidecars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from PIL import Image, ImageDraw, ImageFont

from pipelines.media import Capability
from tests.integration.conftest import Cluster, write_result
from tests.integration.test_vision_jobs import image_result, noisy_png
from workers.core import keys
from workers.core.capabilities import CAPABILITIES

pytestmark = pytest.mark.integration


def test_disabled_vision_enqueues_no_job(cluster: Cluster, tmp_path: Path) -> None:
    out = cluster.cli_json(
        "ingest", str(image_result(tmp_path, [1])), MCP_MEDIA_VISION__ENABLED="false"
    )
    assert out["jobs"] == []
    assert out["text"].startswith("MEDIA:")
    assert cluster.fake.request_count == 0


def test_auxiliary_vision_model_is_the_fallback(cluster: Cluster, tmp_path: Path) -> None:
    image = noisy_png(tmp_path / "a.png", 2)
    out = cluster.cli_json(
        "describe",
        str(image),
        "--inline",
        MCP_MEDIA_VISION__MODEL="",
        AUXILIARY_VISION_MODEL="aux-vl",
    )
    assert out["status"] == "done"
    assert [r.model for r in cluster.fake.received] == ["aux-vl"]


def test_a_missing_model_is_a_clear_start_up_error(cluster: Cluster) -> None:
    proc = cluster.cli("worker", "--queues", "vision", MCP_MEDIA_VISION__MODEL="")
    assert proc.returncode == 2
    assert "MCP_MEDIA_VISION__MODEL" in proc.stderr and "AUXILIARY_VISION_MODEL" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_connection_refused_degrades(cluster: Cluster, tmp_path: Path) -> None:
    image = noisy_png(tmp_path / "a.png", 3)
    out = cluster.cli_json_exit(
        75,  # the provider is unavailable: the same command may succeed later
        "describe",
        str(image),
        "--inline",
        MCP_MEDIA_VISION__BASE_URL="http://127.0.0.1:9/v1",
    )
    assert out["status"] == "degraded"
    assert out["result"]["meta"]["reason"].startswith("connection_refused")
    assert out["result"]["meta"]["outcome"] == "provider_unavailable"


def test_changing_model_or_prompt_changes_the_version_and_reruns(
    cluster: Cluster, tmp_path: Path
) -> None:
    image = str(noisy_png(tmp_path / "a.png", 4))
    first = cluster.cli_json("describe", image, "--inline")
    again = cluster.cli_json("describe", image, "--inline")
    assert cluster.fake.request_count == 1  # the sidecar answered the second time
    assert again["result"] == first["result"]
    new_prompt = cluster.cli_json(
        "describe", image, "--inline", MCP_MEDIA_VISION__PROMPT="List the colours only."
    )
    new_model = cluster.cli_json("describe", image, "--inline", MCP_MEDIA_VISION__MODEL="other")
    versions = {r["result"]["processor_version"] for r in (first, new_prompt, new_model)}
    assert len(versions) == 3
    assert cluster.fake.request_count == 3
    assert cluster.fake.received[1].prompt == "List the colours only."
    vision = CAPABILITIES[Capability.VISION_SUMMARIZE]
    assert vision.version(cluster.settings()) == first["result"]["processor_version"]
    assert (
        vision.version(cluster.settings(MCP_MEDIA_VISION__API_KEY="other-key"))
        == (first["result"]["processor_version"])
    )


def test_the_local_provider_reads_the_text_of_an_image(cluster: Cluster, tmp_path: Path) -> None:
    img = Image.new("RGB", (900, 200), "white")
    ImageDraw.Draw(img).text(
        (30, 60), "Deploy freeze starts Monday", fill="black", font=ImageFont.load_default(size=48)
    )
    path = tmp_path / "text.png"
    img.save(path)
    out = cluster.cli_json(
        "describe",
        str(path),
        "--inline",
        MCP_MEDIA_VISION__PROVIDER="local",
        MCP_MEDIA_VISION__BASE_URL="",
    )
    assert out["status"] == "done"
    summary = out["result"]["output"]["summary"]
    assert "Deploy freeze starts Monday" in summary
    assert "900x200" in summary
    assert cluster.fake.request_count == 0


def test_result_by_id_and_by_sha_and_the_completion_event(cluster: Cluster, tmp_path: Path) -> None:
    cluster.fake.set(reply="Event test.")
    cluster.start_worker("vision")
    listener = redis.Redis.from_url(cluster.broker.url).pubsub()
    listener.subscribe(keys.EVENTS)
    out = cluster.cli_json("ingest", str(image_result(tmp_path, [5])), "--wait", "30")
    (job,) = out["jobs"]
    by_id = cluster.cli_json("result", job["id"])
    by_sha = cluster.cli_json("result", job["sha256"])
    for row in (by_id, by_sha):
        assert row["id"] == job["id"]
        assert row["capability"] == "vision.summarize"
        assert row["status"] == "done"
        assert row["result"]["output"]["summary"] == "Event test."
    events = []
    for _ in range(50):
        message = listener.get_message(timeout=0.1)
        if message and message["type"] == "message":
            events.append(json.loads(message["data"]))
    listener.close()
    assert [e["meta"]["job_id"] for e in events] == [job["id"]]
    status = cluster.cli_json("status")
    assert status["results"]["vision.summarize"] == {"done": 1}
    assert status["queues"]["vision"] == {"waiting": 0, "running": 0}
    assert [w["queues"] for w in status["workers"]] == [["vision"]]
    assert ":***@" in status["broker"]


def test_an_unknown_id_or_hash_is_an_error_and_known_jobs_exit_zero(
    cluster: Cluster, tmp_path: Path
) -> None:
    for ident in ("nonsense", "f" * 64):
        proc = cluster.cli("result", ident)
        assert (proc.returncode, proc.stdout) == (1, "")
        assert proc.stderr == (
            f"mcp-media: error: no job or result is known by {ident!r} (a job id or a sha256)\n"
        )
        as_json = cluster.cli("result", ident, "--json")
        assert as_json.returncode == 1
        error = json.loads(as_json.stdout)
        assert (error["id"], error["status"], error["result"]) == (ident, "unknown", None)
        assert ident in error["error"]
    # A known job exits 0 whatever its status: here it stays queued (no worker).
    (job,) = cluster.cli_json("ingest", str(image_result(tmp_path, [9])))["jobs"]
    for ident in (job["id"], job["sha256"]):
        row = cluster.cli_json("result", ident)
        assert (row["id"], row["status"]) == (job["id"], "pending")
        proc = cluster.cli("result", ident)
        assert proc.returncode == 0
        assert proc.stdout == f"{job['id']} vision.summarize pending\n"


def test_failed_blocks_still_exit_zero_and_bad_input_exits_two(
    cluster: Cluster, tmp_path: Path
) -> None:
    broken = write_result(
        tmp_path / "r.json", [{"type": "image", "data": "@@@", "mimeType": "image/png"}]
    )
    out = cluster.cli_json("ingest", str(broken))
    assert out["markers"][0]["reason"] == "bad_base64"
    (tmp_path / "bad.json").write_text("{not json")
    proc = cluster.cli("ingest", str(tmp_path / "bad.json"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("mcp-media: error: input is not JSON")
    assert len(proc.stderr.strip().splitlines()) == 1
