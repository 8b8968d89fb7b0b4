"""A vision-only install (`mcp-media[jobs,vision]`, no speech extra) runs ingest and the
client against a real broker: the light core never pulls in the speech stack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.cluster import ROOT, Cluster, write_result
from tests.support.factories import audio_block, image_block, png_bytes, wav_bytes
from tests.support.venvs import venv_with

pytestmark = pytest.mark.integration

HEAVY = ("numpy", "av", "sherpa_onnx", "rapidocr_onnxruntime", "onnxruntime", "openai")


@pytest.fixture(scope="module")
def light_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("light-venv")
    # Built from a copy: a build writes build/ and egg-info next to the sources.
    source = tmp_path_factory.mktemp("light-source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for package in ("pipelines", "workers"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return venv_with(target, f"{source}[jobs,vision]")


def test_speech_extra_is_absent(light_python: Path) -> None:
    proc = subprocess.run(
        [str(light_python), "-c", "import av"], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0 and "No module named 'av'" in proc.stderr


def test_ingest_and_client_without_the_speech_extra(
    light_python: Path, cluster: Cluster, tmp_path: Path
) -> None:
    result = write_result(
        tmp_path / "result.json",
        [
            {"type": "text", "text": "two files"},
            image_block(png_bytes()),
            audio_block(wav_bytes(), "audio/wav"),
        ],
    )
    cli = light_python.parent / "mcp-media"
    proc = subprocess.run(
        [str(cli), "ingest", str(result), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository: only the installed package is importable
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [m["kind"] for m in out["media"]] == ["image", "audio"]
    assert {j["capability"] for j in out["jobs"]} == {"vision.summarize", "audio.transcribe"}
    assert all(j["status"] == "pending" for j in out["jobs"])
    assert out["text"].count("MEDIA:") == 2

    script = textwrap.dedent(
        f"""
        import json, sys
        from pipelines import ingest
        from workers.gateways.cluster import MediaClient
        client = MediaClient.connect()
        text = open({str(result)!r}).read()
        rendered = ingest(text, cache=client.settings.media_cache(), server="light")
        handles = client.submit(rendered.jobs)
        heavy = [m for m in {HEAVY!r} if m in sys.modules]
        print(json.dumps({{"heavy": heavy, "ids": [h.id for h in handles]}}))
        client.close()
        """
    )
    proc = subprocess.run(
        [str(light_python), "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["heavy"] == []
    # The same bytes were submitted by the CLI just before: the client shares its job ids.
    assert sorted(report["ids"]) == sorted(j["id"] for j in out["jobs"])


def test_light_core_imports_no_engine() -> None:
    """In the development install too: importing the client and ingest loads no engine."""
    script = (
        "import sys, pipelines, workers.gateways.cluster, workers.gateways.reprocess\n"
        f"print([m for m in {HEAVY!r} + ('workers.runtime', 'workers.jobs') if m in sys.modules])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert proc.stdout.strip() == "[]"
