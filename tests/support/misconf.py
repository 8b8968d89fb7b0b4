"""A Redis that refuses writes as a full disk makes it (MISCONF), and that takes them again."""

from __future__ import annotations

import redis

from tests.support.up import wait_for


def writable(client: redis.Redis[bytes]) -> bool:
    try:
        return bool(client.set("mcp-media-test:probe", "1"))
    except redis.ResponseError as exc:
        if "MISCONF" in str(exc):
            return False
        raise


def refuse_writes(client: redis.Redis[bytes]) -> str:
    """Make the broker refuse writes as a full disk does (MISCONF): a snapshot that cannot
    be written, with `stop-writes-on-bgsave-error` (Redis' default) in force. Returns its
    data folder, for `take_writes`. (`dir` can be set at run time: the embedded 6.2.)"""
    folder = str(client.config_get("dir")["dir"])
    client.config_set("save", "3600 1")
    client.config_set("dir", "/proc")  # nobody, root included, creates a file there
    client.bgsave()
    assert wait_for(lambda: not writable(client), 30), "the broker kept taking writes"
    return folder


def take_writes(client: redis.Redis[bytes], folder: str) -> None:
    """Undo `refuse_writes`: a snapshot that succeeds."""
    client.config_set("dir", folder)
    client.bgsave()
    assert wait_for(lambda: writable(client), 30), "the snapshot did not succeed"
