"""The MCP door's own tools answer a full disk as the HTTP door does (its 507): the disk-full
code, the OS's words and the folder, never an errno; and the door serves on."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.support.audio_samples import encode, tone
from tests.support.cluster import ROOT, Cluster
from tests.support.disk import on_tmpfs

pytestmark = pytest.mark.integration


def test_an_own_tool_on_a_full_disk_says_disk_full_with_the_folder(
    cluster: Cluster, tmp_path: Path
) -> None:
    root = tmp_path / "shared"
    root.mkdir()
    clip = root / "clip.wav"
    clip.write_bytes(encode(tone(8.0), 16_000, "wav"))  # 256 kB: more than the cache holds
    cache = cluster.settings().cache_root
    prefix = on_tmpfs(cache, 64)
    params = StdioServerParameters(
        command=prefix[0],
        args=[
            *prefix[1:],
            sys.executable,
            "-m",
            "workers.cli.main",
            "mcp",
            "--inline",
            "--allow-root",
            str(root),
        ],
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            for _ in range(2):  # the door serves on
                heard = await client.call_tool("transcribe_audio", {"audio": str(clip)})
                assert heard.is_error
                (said,) = [b.text for b in heard.content if isinstance(b, types.TextContent)]
                assert said.startswith("transcribe_audio: the job could not be run (disk_full: ")
                assert "the server cannot store this request: No space left on device" in said
                assert f"under {cache}" in said, said  # the write names no file: the cache
                assert "Errno" not in said and "OSError" not in said, said

    anyio.run(scenario)
