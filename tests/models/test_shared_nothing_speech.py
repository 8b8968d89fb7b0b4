"""Speech across two nodes that share only Redis and an S3 bucket (a real SeaweedFS): the
producer (node A, no models, no workers) speaks and transcribes through node B's workers,
and every `MEDIA:` path it is handed exists on node A."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cluster import Cluster

pytestmark = pytest.mark.models

Nodes = tuple[Cluster, Cluster]


@pytest.fixture
def speech_nodes(nodes: Nodes, models_home: Path) -> Nodes:
    _, b = nodes
    b.home.mkdir(parents=True, exist_ok=True)
    (b.home / "models").symlink_to(models_home / "models")
    b.start_worker("stt", concurrency=1)
    b.start_worker("tts", concurrency=1)
    return nodes


def test_speak_and_transcribe_from_a_node_without_models(
    speech_nodes: Nodes, tmp_path: Path
) -> None:
    a, b = speech_nodes
    assert not (a.home / "models").exists()
    text = "The shared bucket carries every blob between the nodes."
    spoken = a.cli_json("speak", text, "--format", "wav", "--wait", "120")
    assert spoken["status"] == "done", spoken
    path = Path(spoken["path"])
    # The audio was made on node B and fetched into node A's own cache.
    assert path.is_relative_to(a.home / "cache") and path.is_file()
    assert spoken["media_tag"] == f"MEDIA:{path}"
    made_on_b = list((b.home / "cache" / "audio").glob(f"{spoken['sha256']}.*"))
    assert [p.read_bytes() for p in made_on_b] == [path.read_bytes()]
    # --out copies the local file.
    out = tmp_path / "reply.wav"
    copied = a.cli_json("speak", text, "--format", "wav", "--wait", "120", "--out", str(out))
    assert out.read_bytes() == path.read_bytes(), copied
    heard = a.cli("transcribe", str(path), "--format", "json", "--wait", "120", timeout=180)
    assert heard.returncode == 0, heard.stderr
    words = json.loads(heard.stdout)["text"].lower()
    assert "bucket" in words and "nodes" in words, words
