"""Two nodes with separate homes that share only Redis and an S3 bucket (a real SeaweedFS):
jobs submitted on one are served by the other, and what the agent is handed is local.

Node A is the producer (CLI, no workers); node B runs the workers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.media import Capability, MediaKind, StoredBlob
from pipelines.results import Status
from tests.integration.conftest import Cluster, write_result
from tests.integration.test_document_jobs import LATE, good_pdf, pdf_block
from tests.integration.test_mcp_first_contact import door, run, texts
from tests.integration.test_recovery import recovery
from tests.integration.test_vision_jobs import image_result, noisy_png
from tests.support.seaweed import SeaweedS3
from workers.core.gateway import JobHandle
from workers.files.blobs import BlobRef
from workers.files.s3 import S3Bucket
from workers.gateways.cluster import MediaClient

pytestmark = pytest.mark.integration

Nodes = tuple[Cluster, Cluster]


def media_paths(text: str) -> list[Path]:
    return [Path(line[len("MEDIA:") :]) for line in text.splitlines() if line.startswith("MEDIA:")]


def cached_png(client: MediaClient, path: Path, seed: int) -> StoredBlob:
    return client.settings.media_cache().store_file(noisy_png(path, seed), MediaKind.IMAGE)


def test_a_job_submitted_on_one_node_is_served_by_another(nodes: Nodes, tmp_path: Path) -> None:
    a, b = nodes
    a.fake.set(reply="A picture served by node B.")
    b.start_worker("vision")
    result = image_result(tmp_path, [21])
    out = a.cli_json("ingest", str(result), "--wait", "60")
    [job] = out["jobs"]
    assert job["status"] == "done", job
    assert "A picture served by node B." in out["text"]
    [path] = media_paths(out["text"])
    assert path.is_relative_to(a.home) and path.is_file()
    # Node B fetched the image from the bucket into its own cache and checked it.
    fetched = list((b.home / "cache" / "images").glob(f"{job['sha256']}.*"))
    assert [p.read_bytes() for p in fetched] == [path.read_bytes()]
    assert (b.home / "cache" / "replicas" / job["sha256"]).exists()
    # The sidecar (the truth) is in the bucket, not on either node's disk.
    assert not list((b.home / "results").rglob("*.json"))
    assert not list((a.home / "results").rglob("*.json"))
    bucket = S3Bucket(a.settings().store)
    sidecars = [key for key, _, _ in bucket.listing("results/")]
    assert len(sidecars) == 1 and job["sha256"] in sidecars[0]


def test_a_blob_nobody_stored_fails_its_job_with_the_reason(nodes: Nodes, tmp_path: Path) -> None:
    a, b = nodes
    b.start_worker("vision")
    client = a.client()
    try:
        stored = cached_png(client, tmp_path / "never-uploaded.png", 22)
        key = client.key(Capability.VISION_SUMMARIZE, stored.sha256)
        ref = BlobRef(stored.sha256, MediaKind.IMAGE, ".png", stored.size)
        # A message naming a blob that was never put in the bucket (as a producer that
        # crashed between its cache and its upload would leave).
        client.app.send_task(
            "mcp_media.summarize_image",
            kwargs={"key": str(key), "blob": ref.to_json()},
            task_id="never-uploaded",
            queue="vision",
        )
        sent = JobHandle("never-uploaded", key, stored.path, Status.PENDING)
        [handle] = client.wait([sent], timeout=60)
    finally:
        client.close()
    assert handle.envelope is not None
    assert handle.envelope.status is Status.FAILED
    assert "is not in s3://" in (handle.envelope.reason or ""), handle.envelope.reason


def test_a_lost_message_is_sent_again_from_the_shared_journal(nodes: Nodes, tmp_path: Path) -> None:
    a, b = nodes
    client = a.client()
    try:
        stored = cached_png(client, tmp_path / "lost.png", 23)
        handle = client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
        assert client.redis.delete("vision") == 1  # the message is lost
        assert not (a.home / "jobs").exists()  # journalled in the bucket, not on A's disk
    finally:
        client.close()
    # Node B's sweep (what its workers' heartbeat runs) finds it in the shared journal.
    other = b.client()
    try:
        assert recovery(other).sweep(grace=0, settle=0) == [handle.id]
    finally:
        other.close()
    b.start_worker("vision")
    waiter = a.client()
    try:
        [done] = waiter.wait([handle], timeout=60)
        assert done.envelope is not None and done.envelope.status is Status.DONE
        # Any node's next sweep drops the entry of a finished job.
        assert recovery(waiter).sweep(grace=0, settle=0) == []
        assert list(waiter.journal.entries()) == []
    finally:
        waiter.close()


def test_reprocess_on_a_producer_sees_what_the_cluster_did(nodes: Nodes, tmp_path: Path) -> None:
    a, b = nodes
    b.start_worker("vision")
    out = a.cli_json("ingest", str(image_result(tmp_path, [24, 25])), "--wait", "60")
    assert [job["status"] for job in out["jobs"]] == ["done", "done"]
    plan = a.cli_json("reprocess", "--missing", "--dry-run")
    assert plan["selected"] == 0, plan
    # Another node sees the same bucket: its plan lists the cluster's inputs, not its disk.
    c = Cluster(tmp_path / "node-c", a.broker, a.fake)
    c.env_vars.update({k: v for k, v in a.env_vars.items() if k != "MCP_MEDIA_HOME"})
    plan = c.cli_json("reprocess", "--all", "--dry-run")
    assert plan["selected"] == 2, plan


def test_a_document_digested_on_another_node_is_read_where_it_was_asked(
    nodes: Nodes, tmp_path: Path
) -> None:
    a, b = nodes
    b.start_worker("documents", 1)
    result = write_result(tmp_path / "r.json", [pdf_block(good_pdf(), "log.pdf")])
    out = a.cli_json("ingest", str(result), "--wait", "120")
    [job] = out["jobs"]
    assert job["status"] == "done", job
    # The text the agent is pointed to is on node A, beside A's copy of the document.
    markdown = Path(job["result"]["output"]["markdown"])
    assert markdown.is_relative_to(a.home) and markdown.is_file(), markdown
    assert f"[document text saved to {markdown} (" in out["text"]
    assert LATE in markdown.read_text(encoding="utf-8")  # all of it, not the excerpt
    assert any((b.home / "cache" / "documents").rglob("*.md"))  # written by B's worker
    # The text shared in the bucket is our output, not a document to digest again.
    plan = a.cli_json("reprocess", "--kind", "document", "--all", "--dry-run")
    assert plan["selected"] == 1, plan

    markdown.unlink()  # gone (a cache cleaned by hand): read_document gets it back from the bucket

    async def scenario() -> None:
        stderr = tmp_path / "mcp.stderr"
        async with door(a.home, stderr, "mcp", "--wait", "120", **a.env_vars) as client:
            read = await client.call_tool(
                "read_document", {"document": job["sha256"], "pages": "7"}
            )
            assert not read.is_error, texts(read)
            assert LATE in texts(read)[0]
            assert read.structured_content is not None
            assert read.structured_content["path"] == str(markdown)

    run(scenario)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "credentials were refused"),
        ({"MCP_MEDIA_STORE__URL": "s3://no-such-bucket"}, "does not exist"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line_at_start(
    nodes: Nodes, s3_server: SeaweedS3, change: dict[str, str], said: str
) -> None:
    a, _ = nodes
    a.env_vars.update(change)
    proc = a.cli("status", "--json")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_journal_entry_names_the_blob_not_a_path(nodes: Nodes, tmp_path: Path) -> None:
    a, _ = nodes
    client = a.client()
    try:
        stored = cached_png(client, tmp_path / "j.png", 26)
        handle = client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
        body = client.journal.get(handle.id)
    finally:
        client.close()
    assert body is not None
    assert "path" not in body["kwargs"]
    assert body["kwargs"]["blob"] == {
        "sha256": stored.sha256,
        "kind": "image",
        "ext": ".png",
        "size": stored.size,
    }
    assert str(a.home) not in json.dumps(body)
