"""Settings read from an environment: the home is always an absolute path."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.core.settings import Settings

pytestmark = pytest.mark.unit


def test_a_relative_home_names_the_folder_from_where_the_command_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({"MCP_MEDIA_HOME": "rel/home"})
    assert settings.home == tmp_path / "rel" / "home"
    assert settings.models_root.is_absolute()


def test_a_home_under_the_user_folder_is_expanded() -> None:
    settings = Settings.from_env({"MCP_MEDIA_HOME": "~/media"})
    assert settings.home == Path("~/media").expanduser()
    assert settings.home.is_absolute()
