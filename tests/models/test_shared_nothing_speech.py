"""Speech across three nodes that share only Redis and an S3 bucket (a real SeaweedFS): the
producer (node A, no models, no workers) speaks through node C's tts worker and transcribes
through node B's stt worker, and every `MEDIA:` path it is handed exists on node A."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster

pytestmark = pytest.mark.models

Nodes = tuple[Cluster, Cluster]


@pytest.fixture
def speech_nodes(nodes: Nodes, models_home: Path, tmp_path: Path) -> Iterator[tuple[Cluster, ...]]:
    """(A, B, C): B runs the stt worker, C the tts worker, each in a home of its own."""
    a, b = nodes
    c = Cluster(tmp_path / "node-c", a.broker, a.fake)
    c.env_vars.update({k: v for k, v in b.env_vars.items() if k != "MCP_MEDIA_HOME"})
    for node in (b, c):
        node.home.mkdir(parents=True, exist_ok=True)
        (node.home / "models").symlink_to(models_home / "models")
    b.start_worker("stt", concurrency=1)
    c.start_worker("tts", concurrency=1)
    yield a, b, c
    c.stop()


def test_speak_and_transcribe_from_a_node_without_models(
    speech_nodes: tuple[Cluster, ...], tmp_path: Path
) -> None:
    a, b, c = speech_nodes
    assert not (a.home / "models").exists()
    text = "The shared bucket carries every blob between the nodes."
    spoken = a.cli_json("speak", text, "--format", "wav", "--wait", "120")
    assert spoken["status"] == "done", spoken
    path = Path(spoken["path"])
    # The audio was made on node C and fetched into node A's own cache.
    assert path.is_relative_to(a.home / "cache") and path.is_file()
    assert spoken["media_tag"] == f"MEDIA:{path}"
    made_on_c = list((c.home / "cache" / "audio").glob(f"{spoken['sha256']}.*"))
    assert [p.read_bytes() for p in made_on_c] == [path.read_bytes()]
    # --out copies the local file.
    out = tmp_path / "reply.wav"
    copied = a.cli_json("speak", text, "--format", "wav", "--wait", "120", "--out", str(out))
    assert out.read_bytes() == path.read_bytes(), copied
    # Node B hears it: fetched from the bucket (C put it there), not from A or C.
    heard = a.cli("transcribe", str(path), "--format", "json", "--wait", "120", timeout=180)
    assert heard.returncode == 0, heard.stderr
    words = json.loads(heard.stdout)["text"].lower()
    assert "bucket" in words and "nodes" in words, words
    assert list((b.home / "cache" / "audio").glob(f"{spoken['sha256']}.*"))


def test_a_node_without_the_store_is_told_instead_of_handed_a_foreign_path(
    speech_nodes: tuple[Cluster, ...], tmp_path: Path
) -> None:
    a, _, c = speech_nodes
    lost = Cluster(tmp_path / "node-d", a.broker, a.fake)  # MCP_MEDIA_STORE__URL forgotten
    spoken = lost.cli_json_exit(
        1, "speak", "Where did my reply go?", "--format", "wav", "--wait", "120"
    )
    assert spoken["status"] == "degraded", spoken
    assert spoken["path"] is None and spoken["media_tag"] is None
    assert "MCP_MEDIA_STORE__URL" in spoken["reason"], spoken["reason"]
    assert str(c.home) not in json.dumps(spoken)
