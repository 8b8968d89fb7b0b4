"""`mcp-media down` against an embedded broker that cannot save: it is stopped anyway, and
the user is told what could not be saved and where its data is."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.integration.test_cli_cluster import _cli, _gone
from tests.support.misconf import refuse_writes
from workers.broker.embedded import ensure_embedded, running_embedded, stop_embedded

pytestmark = pytest.mark.integration


def test_down_stops_a_broker_that_cannot_save_and_says_what_was_lost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    broker = ensure_embedded(home)
    assert broker.pid is not None
    client = redis.Redis.from_url(broker.url)
    try:
        client.set("mcp-media-test:kept", "1")
        refuse_writes(client)  # its snapshot cannot be written: SHUTDOWN and SIGTERM refuse

        down = _cli(home, "down")

        assert down.returncode == 0, down.stderr
        assert running_embedded(home) is None
        assert _gone(broker.pid), down.stderr
        folder = home / "redis"
        said = down.stderr.splitlines()
        assert said[0].startswith("mcp-media: the embedded broker could not save"), said
        assert "since its last save" in said[0] and "could not be saved" in said[0]
        assert said[0].endswith(f"its data folder: {folder}"), said
        assert said[1] == f"mcp-media: stopped the embedded broker on 127.0.0.1:{broker.port}"
        assert "Error trying to save the DB, can't exit" in (folder / "redis.log").read_text()
    finally:
        client.close()
        stop_embedded(home)


def test_a_normal_down_saves(tmp_path: Path) -> None:
    home = tmp_path / "home"
    broker = ensure_embedded(home)
    client = redis.Redis.from_url(broker.url)
    try:
        client.set("mcp-media-test:kept", "1")
        client.config_set("save", "3600 1")  # so that a clean SHUTDOWN writes a snapshot

        down = _cli(home, "down")

        assert down.returncode == 0, down.stderr
        assert down.stderr == f"mcp-media: stopped the embedded broker on 127.0.0.1:{broker.port}\n"
        log = (home / "redis" / "redis.log").read_text()
        assert "DB saved on disk" in log and "can't exit" not in log
        client.close()
        again = ensure_embedded(home)
        client = redis.Redis.from_url(again.url)
        assert client.get("mcp-media-test:kept") == b"1"
    finally:
        client.close()
        stop_embedded(home)
