"""piper's phoneme ids for the onnxruntime VITS engine, without a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.engines.vits import read_token_ids, token_ids
from pipelines.errors import ConfigError

pytestmark = pytest.mark.unit


def _tokens(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_clause_becomes_bos_blank_then_each_symbol_and_a_blank_then_eos(
    tmp_path: Path,
) -> None:
    ids = read_token_ids(_tokens(tmp_path, "_ 0\n^ 1\n$ 2\n  3\na 14\nˈ 120\n"))
    assert ids[" "] == 3
    assert token_ids(ids, "ˈa a") == [1, 0, 120, 0, 14, 0, 3, 0, 14, 0, 2]


def test_a_symbol_the_voice_lacks_is_skipped(tmp_path: Path) -> None:
    ids = read_token_ids(_tokens(tmp_path, "_ 0\n^ 1\n$ 2\na 14\n"))
    assert token_ids(ids, "a☃a") == [1, 0, 14, 0, 14, 0, 2]
    assert token_ids(ids, "") == [1, 0, 2]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("_ 0\n^ 1\n$ 2\nab 3\n", "is not '<one symbol> <id>'"),
        ("_ 0\n^ 1\n$ 2\na x\n", "is not '<one symbol> <id>'"),
        ("_ 0\n^ 1\n$ 2\n5\n", "is not '<one symbol> <id>'"),
        ("_ 0\na 1\n", r"lacks piper's \^ \$ symbols"),
    ],
)
def test_a_malformed_token_file_is_refused_with_the_line(
    tmp_path: Path, text: str, reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        read_token_ids(_tokens(tmp_path, text))
