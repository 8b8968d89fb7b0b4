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


def _own_tools(cluster: Cluster, wait: str) -> StdioServerParameters:
    """`mcp-media mcp --wait <wait>` on `cluster`, with a tts and stt worker started."""
    cluster.start_worker("tts,stt", concurrency=1)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "mcp", "--wait", wait],
        env=cluster.env(PYTHONPATH=str(ROOT)),
        cwd=str(ROOT),
    )


def test_media_result_of_speak_and_transcribe_gives_what_the_job_made(
    speech_cluster: Cluster,
) -> None:
    params = _own_tools(speech_cluster, "0")

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


def test_transcribe_audio_times_each_word_when_asked(speech_cluster: Cluster) -> None:
    params = _own_tools(speech_cluster, "120")

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=240) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert tools["transcribe_audio"].input_schema["properties"]["words"]["type"] == (
                "boolean"
            )
            spoken = await client.call_tool("speak", {"text": "The invoice was paid on Monday."})
            assert spoken.structured_content is not None
            assert spoken.structured_content["status"] == "done", spoken.structured_content
            sha = Path(spoken.structured_content["path"]).name.split(".")[0]  # the audio's

            timed = await client.call_tool("transcribe_audio", {"audio": sha, "words": True})
            assert timed.structured_content is not None and not timed.is_error, timed.content
            assert timed.structured_content["status"] == "done", timed.structured_content
            words = timed.structured_content["words"]
            assert [w["word"].strip(".,").lower() for w in words][-3:] == ["paid", "on", "monday"]
            starts = [w["start"] for w in words]
            assert starts == sorted(starts) and all(w["start"] <= w["end"] for w in words)
            (text,) = [b.text for b in timed.content if isinstance(b, types.TextContent)]
            line = text.splitlines()[-1]
            assert text.splitlines()[0].lower().rstrip(".").endswith("paid on monday")
            assert line == "words: " + " ".join(
                f"{w['word']}@{w['start']:.2f}-{w['end']:.2f}" for w in words
            )

            cues = await client.call_tool(
                "transcribe_audio", {"audio": sha, "words": True, "format": "vtt"}
            )
            (vtt,) = [b.text for b in cues.content if isinstance(b, types.TextContent)]
            assert vtt.startswith("WEBVTT") and vtt.count(" --> ") == len(words)

            plain = await client.call_tool("transcribe_audio", {"audio": sha})
            assert plain.structured_content is not None
            assert plain.structured_content["words"] is None
            (shown,) = [b.text for b in plain.content if isinstance(b, types.TextContent)]
            assert "words:" not in shown and "@" not in shown

            refused = await client.call_tool("transcribe_audio", {"audio": sha, "words": "yes"})
            assert refused.is_error
            (why,) = [b.text for b in refused.content if isinstance(b, types.TextContent)]
            assert "words must be true" in why

    anyio.run(scenario)
