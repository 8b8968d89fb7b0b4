"""The sherpa-layout copy of a prepared whisper folder: made once beside it through a
temporary sibling, reused untouched, and never left half-made (tiny ONNX files stand in for
the real graphs: the adapters are written whether or not a graph is there)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipelines.engines import sherpa_whisper
from pipelines.engines.sherpa_whisper import copy_folder, layout_copy
from pipelines.errors import ConfigError
from pipelines.onnx_metadata import write_with_metadata

pytestmark = pytest.mark.unit

SHAPE = {"n_text_layer": "2", "n_text_head": "2", "n_text_state": "8", "n_text_ctx": "4"}


def _prepared(models: Path, name: str = "whisper-tiny.en") -> Path:
    folder = models / name
    folder.mkdir(parents=True)
    bare = models / "bare.onnx"
    bare.write_bytes(b"")
    write_with_metadata(bare, folder / "encoder.int8.onnx", SHAPE)
    bare.unlink()
    (folder / "decoder.int8.onnx").write_bytes(b"")
    (folder / "tokens.txt").write_text("a 0\n")
    (folder / "mel_filters.npy").write_bytes(b"\x93NUMPY")
    return folder


def _stamps(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (folder, *folder.iterdir())}


def test_the_copy_is_made_once_beside_the_folder_and_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _prepared(tmp_path)
    with caplog.at_level(logging.WARNING, logger="mcp_media.speech"):
        copy = layout_copy(folder)
        assert copy == tmp_path / "sherpa-onnx-whisper-tiny.en" == copy_folder(folder)
        assert sorted(p.name for p in copy.iterdir()) == [
            "whisper-tiny.en-decoder.int8.onnx",
            "whisper-tiny.en-encoder.int8.onnx",
            "whisper-tiny.en-tokens.txt",
        ]
        assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name, folder.name]
        stamps = _stamps(copy)
        assert layout_copy(folder) == copy
    assert _stamps(copy) == stamps
    made = [r.getMessage() for r in caplog.records]
    assert len(made) == 1 and str(folder) in made[0] and str(copy) in made[0]


def test_a_rival_that_finishes_first_is_reused_and_the_staging_folder_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _prepared(tmp_path)
    real_export = sherpa_whisper.export

    def rival_first(src: Path, out: Path) -> Path:
        real_export(src, copy_folder(src))  # another worker renames its copy in meanwhile
        return real_export(src, out)

    monkeypatch.setattr(sherpa_whisper, "export", rival_first)
    with caplog.at_level(logging.WARNING, logger="mcp_media.speech"):
        assert layout_copy(folder) == copy_folder(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == [copy_folder(folder).name, folder.name]
    assert caplog.records == []  # the rival made it, and says so in its own log


def test_a_half_folder_in_the_way_is_named_and_nothing_is_left_behind(tmp_path: Path) -> None:
    folder = _prepared(tmp_path, "whisper-base")
    in_the_way = copy_folder(folder)
    in_the_way.mkdir()
    (in_the_way / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is in the way of the sherpa-onnx copy"):
        layout_copy(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == [in_the_way.name, folder.name]


def test_a_folder_that_is_not_ours_is_refused_without_a_copy(tmp_path: Path) -> None:
    folder = _prepared(tmp_path)
    (folder / "mel_filters.npy").unlink()
    with pytest.raises(ConfigError, match=r"no mel_filters\.npy"):
        layout_copy(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]
