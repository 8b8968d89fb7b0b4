"""The own tools give back what a job made: a real SDK client, a real `mcp-media proxy` on
the queues, real tts and stt workers with the prepared models."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.support.cluster import ROOT, Cluster

pytestmark = pytest.mark.models


async def _finished(client: Client, job_id: str) -> types.CallToolResult:
    """media_result of `job_id`, asked until the job is finished (a generous bound)."""
    with anyio.fail_after(240):
        while True:
            got = await client.call_tool("media_result", {"id": job_id})
            assert not got.is_error and got.structured_content is not None
            if got.structured_content["status"] != "pending":
                return got
            await anyio.sleep(0.2)


def test_media_result_of_speak_and_transcribe_gives_what_the_job_made(
    speech_cluster: Cluster,
) -> None:
    speech_cluster.start_worker("tts,stt", concurrency=1)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "mcp", "--wait", "0"],
        env=speech_cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            spoken = await client.call_tool("speak", {"text": "The invoice was paid on Monday."})
            assert spoken.structured_content is not None
            assert spoken.structured_content["status"] == "pending"
            got = await _finished(client, spoken.structured_content["id"])
            assert got.structured_content is not None
            assert got.structured_content["status"] == "done"
            assert [b.type for b in got.content] == ["audio", "text"]
            audio, tag = got.content
            assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/ogg"
            assert isinstance(tag, types.TextContent)
            assert tag.text.startswith("[[audio_as_voice]]\nMEDIA:")
            path = Path(tag.text.split("MEDIA:", 1)[1])
            assert path.is_file() and path.read_bytes() == base64.b64decode(audio.data)

            sha = path.name.split(".")[0]
            heard = await client.call_tool("transcribe_audio", {"audio": sha})
            assert heard.structured_content is not None
            done = await _finished(client, heard.structured_content["id"])
            (text,) = [b.text for b in done.content if isinstance(b, types.TextContent)]
            assert "paid on monday" in text.lower()

            # The spoken reply is cached media: listed, newest first, and readable.
            listed = (await client.list_resources(cache_mode="refresh")).resources
            assert str(listed[0].uri) == f"mcp-media://media/{sha}"
            assert listed[0].mime_type == "audio/ogg"

    anyio.run(scenario)
