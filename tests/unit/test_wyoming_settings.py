"""The Wyoming door's settings: MCP_MEDIA_WYOMING__* read as a section, each given flag laid
over its setting, a bound at or below zero refused from either side."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from workers.cli.common import CliError
from workers.cli.wyoming import add_wyoming_flags, wyoming_options
from workers.core.settings import Settings

pytestmark = pytest.mark.unit


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_wyoming_flags(parser)
    return parser.parse_args(list(flags))


def test_defaults_without_flags_or_settings() -> None:
    options = wyoming_options(parse(), Settings.from_env({}))
    assert options.uri == "tcp://127.0.0.1:10300"
    assert options.allow_remote is False
    assert (options.max_connections, options.idle_timeout) == (16, 60.0)
    assert (options.max_audio_seconds, options.max_chunk_kb, options.wait) == (120.0, 1024, None)
    assert options.zeroconf == ""


def test_settings_read_from_the_environment() -> None:
    env = {
        "MCP_MEDIA_WYOMING__URI": "tcp://0.0.0.0:10301",
        "MCP_MEDIA_WYOMING__ALLOW_REMOTE": "true",
        "MCP_MEDIA_WYOMING__MAX_CONNECTIONS": "4",
        "MCP_MEDIA_WYOMING__IDLE_TIMEOUT": "9.5",
        "MCP_MEDIA_WYOMING__MAX_AUDIO_SECONDS": "30",
        "MCP_MEDIA_WYOMING__MAX_CHUNK_KB": "64",
        "MCP_MEDIA_WYOMING__WAIT": "20",
        "MCP_MEDIA_WYOMING__ZEROCONF": "kitchen",
    }
    options = wyoming_options(parse(), Settings.from_env(env))
    assert options.uri == "tcp://0.0.0.0:10301"
    assert options.allow_remote is True
    assert (options.max_connections, options.idle_timeout) == (4, 9.5)
    assert (options.max_audio_seconds, options.max_chunk_kb, options.wait) == (30.0, 64, 20.0)
    assert options.zeroconf == "kitchen"


def test_each_given_flag_wins_over_its_setting() -> None:
    env = {"MCP_MEDIA_WYOMING__MAX_CONNECTIONS": "4", "MCP_MEDIA_WYOMING__IDLE_TIMEOUT": "9"}
    args = parse("--max-connections", "2", "--uri", "unix:///tmp/w.sock", "--allow-remote")
    options = wyoming_options(args, Settings.from_env(env))
    assert (options.max_connections, options.idle_timeout) == (2, 9.0)
    assert options.uri == "unix:///tmp/w.sock"
    assert options.allow_remote is True
    assert wyoming_options(parse("--zeroconf"), Settings.from_env({})).zeroconf == "mcp-media"


@pytest.mark.parametrize("flag", ["--max-connections", "--max-chunk-kb"])
def test_a_flag_bound_at_zero_is_refused(flag: str) -> None:
    with pytest.raises(CliError, match=f"{flag} must be above 0"):
        wyoming_options(parse(flag, "0"), Settings.from_env({}))


def test_a_setting_bound_at_zero_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_audio_seconds"):
        Settings.from_env({"MCP_MEDIA_WYOMING__MAX_AUDIO_SECONDS": "0"})
