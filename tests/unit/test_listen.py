"""The secret a network door is given: refused in one line when it cannot be a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.doors.listen import ListenError, resolve_secret

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("short", "at least 16 characters"),
        ("${MCP_MEDIA_API__KEY:-}", "unexpanded variable"),
        ("$MCP_MEDIA_API__KEY_FROM_ENV", "unexpanded variable"),
    ],
)
def test_a_key_that_cannot_be_a_secret_is_refused(tmp_path: Path, given: str, said: str) -> None:
    with pytest.raises(ListenError, match=said):
        resolve_secret(tmp_path, given, "0.0.0.0", file="api-key", how="MCP_MEDIA_API__KEY")
    assert not (tmp_path / "api-key").exists()


def test_a_good_key_is_used_and_none_is_made_on_loopback(tmp_path: Path) -> None:
    key = "k" * 24
    assert resolve_secret(tmp_path, key, "0.0.0.0", file="api-key", how="X") == key
    made = resolve_secret(tmp_path, None, "127.0.0.1", file="api-key", how="X")
    assert len(made) >= 32 and (tmp_path / "api-key").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ListenError, match="without a key"):
        resolve_secret(tmp_path, "", "0.0.0.0", file="api-key", how="X")
