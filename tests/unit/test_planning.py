"""Worker sizing and reprocess selection, without any service."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.media import Capability, MediaKind
from pipelines.results import Envelope, ResultKey, Status
from tests.support.factories import png_bytes, wav_bytes
from workers.cli.supervisor import plan_concurrency, pool_for
from workers.core.capabilities import CAPABILITIES
from workers.core.operations import Selection
from workers.core.settings import Settings
from workers.gateways.reprocess import Tally, select

pytestmark = pytest.mark.unit
CORES = len(os.sched_getaffinity(0))


def settings_with(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"MCP_MEDIA_HOME": str(tmp_path / "home"), **env})


def test_pool_per_queue_kind() -> None:
    assert pool_for(["vision"]) == "threads"
    assert pool_for(["stt"]) == "prefork"
    assert pool_for(["vision", "tts"]) == "prefork"  # one CPU-bound queue decides


def test_threads_pool_takes_what_is_asked(tmp_path: Path) -> None:
    assert plan_concurrency(settings_with(tmp_path), ["vision"], 16) == 16
    assert plan_concurrency(settings_with(tmp_path), ["vision"], None) == 4


def test_processes_times_threads_never_exceed_cores(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, MCP_MEDIA_STT__THREADS="2")
    assert plan_concurrency(settings, ["stt"], None) == max(1, CORES // 2)
    assert plan_concurrency(settings, ["stt"], 64) == max(1, CORES // 2)
    one = settings_with(tmp_path)
    assert plan_concurrency(one, ["stt", "tts"], None) == CORES


def _image(settings: Settings, seed: int) -> str:
    data = png_bytes(colour=(seed, 30, 30))
    return settings.media_cache().store_bytes(data, MediaKind.IMAGE, mime="image/png").sha256


def _result(settings: Settings, cap: Capability, sha: str, status: Status) -> None:
    key = ResultKey(cap, CAPABILITIES[cap].version(settings), sha)
    settings.sidecars().write(Envelope(status, key, {}))


def test_reprocess_selection_reads_the_disk(tmp_path: Path) -> None:
    settings = settings_with(tmp_path)
    done, degraded, fresh = (_image(settings, seed) for seed in range(3))
    audio = (
        settings.media_cache().store_bytes(wav_bytes(), MediaKind.AUDIO, mime="audio/wav").sha256
    )
    _result(settings, Capability.VISION_SUMMARIZE, done, Status.DONE)
    _result(settings, Capability.VISION_SUMMARIZE, degraded, Status.DEGRADED)

    def chosen(selection: Selection) -> tuple[set[str], Tally]:
        tally = Tally()
        return {item.sha256 for item in select(settings, selection, tally)}, tally

    images = (MediaKind.IMAGE,)
    missing, tally = chosen(Selection(images))
    assert missing == {fresh} and tally.skipped == 2
    assert chosen(Selection(images, include_degraded=True))[0] == {fresh, degraded}
    assert chosen(Selection(images, mode="all"))[0] == {done, degraded, fresh}
    both, tally = chosen(Selection((MediaKind.IMAGE, MediaKind.AUDIO)))
    assert both == {fresh, audio} and tally.by_kind == {"image": 1, "audio": 1}
    assert len(chosen(Selection(images, mode="all", limit=2))[0]) == 2


def test_a_new_prompt_makes_everything_missing_again(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path, MCP_MEDIA_VISION__BASE_URL="http://127.0.0.1:9/v1", MCP_MEDIA_VISION__MODEL="m"
    )
    sha = _image(settings, 1)
    _result(settings, Capability.VISION_SUMMARIZE, sha, Status.DONE)
    assert list(select(settings, Selection((MediaKind.IMAGE,)), Tally())) == []
    changed = settings_with(
        tmp_path,
        MCP_MEDIA_VISION__BASE_URL="http://127.0.0.1:9/v1",
        MCP_MEDIA_VISION__MODEL="m",
        MCP_MEDIA_VISION__PROMPT="new prompt",
    )
    assert [i.sha256 for i in select(changed, Selection((MediaKind.IMAGE,)), Tally())] == [sha]
