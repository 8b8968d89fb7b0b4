"""The document reader's child when its library is missing: it says so and exits with its own
status, and the parent turns that status into advice naming the extra to install (a fresh
install without the `documents` extra read "the pipe closed" before)."""

from __future__ import annotations

import sys

import pytest

from pipelines.engines import reader_child
from pipelines.engines.frames import FrameError
from pipelines.engines.reader import start_failure

pytestmark = pytest.mark.unit


def test_the_child_without_pypdfium2_exits_with_its_own_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # an import of it now fails
    assert reader_child.main(["1048576"]) == reader_child.MISSING_LIBRARY
    captured = capsys.readouterr()
    assert captured.out == ""  # never said it was ready
    assert "pypdfium2" in captured.err


def test_a_missing_library_is_told_as_the_extra_to_install() -> None:
    said = str(start_failure(reader_child.MISSING_LIBRARY, FrameError("the pipe closed")))
    assert "pypdfium2) is not installed" in said
    assert "pip install 'mcp-media[documents]'" in said


def test_any_other_start_failure_keeps_its_status_and_cause() -> None:
    said = str(start_failure(-9, FrameError("the pipe closed")))
    assert said == "the document reader did not start (status -9): the pipe closed"
