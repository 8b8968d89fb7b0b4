"""Mandarin as Chinese users write it, on the quality tier's real models: Kokoro speaks a
sentence, whisper base hears it through a real worker, and the text comes back in Simplified
characters (天气, not 天氣) unless a request or the setting asks for Traditional."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.engines.registry import load_tts
from pipelines.speech.config import TtsConfig
from pipelines.speech.tts import TextToSpeech
from tests.support.cluster import Cluster
from workers.provisioning.models import ModelInfo, prepare

pytestmark = pytest.mark.models

MANDARIN = "今天天气很好，我们下午去公园散步。"


@pytest.fixture(scope="module")
def mandarin_note(
    models_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, list[ModelInfo]]]:
    """A Mandarin sentence in Kokoro's zf_xiaobei voice (the quality tier)."""
    quality = prepare(models_home, tier="quality", log=lambda message: None)
    kokoro: TextToSpeech = load_tts(TtsConfig(models_home / "models" / "kokoro-v1.0"))
    folder = tmp_path_factory.mktemp("mandarin")
    note = kokoro.for_voice("zf_xiaobei").synthesize_to_file(MANDARIN, folder / "zh.wav", "wav")
    assert note.path is not None
    yield note.path, quality


def test_mandarin_is_written_in_simplified_unless_traditional_is_asked_for(
    cluster: Cluster, models_home: Path, mandarin_note: tuple[Path, list[ModelInfo]]
) -> None:
    note, _ = mandarin_note
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    cluster.env_vars.update(MCP_MEDIA_STT__MODEL="whisper-base")
    cluster.start_worker("stt", concurrency=1)

    def heard(*language: str) -> str:
        out = cluster.cli_json("transcribe", str(note), *language, "--wait", "110")
        assert out["status"] == "done" and out["language"] == "zh", json.dumps(out)
        return str(out["text"])

    simplified = heard()  # detected as Mandarin, written as the speaker wrote it
    assert "天气" in simplified and "我们" in simplified, simplified
    assert not set("氣們園") & set(simplified), simplified
    assert heard("--language", "zh-CN") == simplified  # the same job
    traditional = heard("--language", "zh-Hant")
    assert "天氣" in traditional and "我們" in traditional, traditional
    assert heard("--language", "zh-TW") == traditional
    # The default can be Traditional too; a request still picks Simplified.
    cluster.stop()
    cluster.env_vars.update(MCP_MEDIA_STT__CHINESE_SCRIPT="traditional")
    cluster.start_worker("stt", concurrency=1)
    assert "天氣" in heard()
    assert heard("--language", "zh-Hans") == simplified
