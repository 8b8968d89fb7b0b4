"""The MCP door end to end: a real MCP client (the official SDK) talks over stdio to a real
`mcp-media proxy` process, which wraps real SDK servers; summaries come from the local
OpenAI-protocol server through the real `openai` client, inline or from real workers."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio
import mcp_types as types
import pytest
import redis
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from pipelines.media import MediaKind
from tests.integration.conftest import ROOT, Cluster
from tests.support.audio_samples import encode, tone
from tests.support.misconf import refuse_writes, take_writes
from tests.support.venvs import venv_with
from workers.broker.embedded import ensure_embedded, stop_embedded

pytestmark = pytest.mark.integration

UPSTREAM = [sys.executable, "-m", "tests.support.mcp_upstream"]


@asynccontextmanager
async def proxied(
    cluster: Cluster, *args: str, errlog: TextIO | None = None, **env: str
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", *args],
        env=cluster.env(PYTHONPATH=str(ROOT), **env),
        cwd=str(ROOT),
    )
    server = params if errlog is None else stdio_client(params, errlog=errlog)
    async with Client(server, read_timeout_seconds=120) as client:
        yield client


def texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


def kinds(result: types.CallToolResult) -> list[str]:
    return [b.type for b in result.content]


def run(test: Any) -> Any:
    return anyio.run(test)


def wrap(*upstream: str) -> list[str]:
    return ["--", *UPSTREAM, *upstream]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("keep", ["text", "image", "text"]),
        ("text", ["text", "text"]),
        ("link", ["text", "resource_link", "text"]),
    ],
)
def test_image_policies_with_inline_summaries(
    cluster: Cluster, policy: str, expected: list[str]
) -> None:
    cluster.fake.set(reply="An invoice for $1,250.")

    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--images", policy, *wrap()) as client:
            result = await client.call_tool("screenshot", {})
            assert kinds(result) == expected
            note = texts(result)[-1]
            assert note.startswith("\nMEDIA:") and note.endswith("\n")  # lines of its own
            assert "An invoice for $1,250." in note
            if policy == "link":
                link = result.content[1]
                assert isinstance(link, types.ResourceLink)
                read = await client.read_resource(str(link.uri))
                (blob,) = read.contents
                assert isinstance(blob, types.BlobResourceContents)
                cached = Path(note.splitlines()[1].removeprefix("MEDIA:"))
                assert base64.b64decode(blob.blob) == cached.read_bytes()

    run(scenario)


def test_structured_output_error_results_and_upstream_errors_pass_through(
    cluster: Cluster,
) -> None:
    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--wait", "0", *wrap()) as client:
            stats = await client.call_tool("stats", {})  # the client checks the output schema
            assert stats.structured_content == {"files": 42, "bytes_used": 1250000}
            failed = await client.call_tool("error_with_image", {})
            assert failed.is_error
            assert kinds(failed) == ["text", "image", "text"]
            assert texts(failed)[1].startswith("\nMEDIA:")
            refused = await client.call_tool("refuse", {})
            assert refused.is_error and "refused on purpose" in " ".join(texts(refused))
            unknown = await client.call_tool("no_such_tool", {})  # the upstream's own answer
            assert unknown.is_error

    run(scenario)


def test_progress_is_forwarded(cluster: Cluster) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            result = await client.call_tool("slow", {"steps": 3}, progress_callback=progress)
            assert texts(result) == ["done after 3 steps"]

    run(scenario)
    assert [s[0] for s in seen] == [1, 2, 3] and seen[-1][2] == "step 3"


def test_crashed_upstream_gives_an_error_and_comes_back(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            crashed = await client.call_tool("crash", {})
            assert crashed.is_error
            assert "started again on the next call" in texts(crashed)[0]
            again = await client.call_tool("who", {})
            assert texts(again) == ["upstream"] and not again.is_error

    run(scenario)


def test_config_with_two_upstreams(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        name: {"command": UPSTREAM[0], "args": [*UPSTREAM[1:], "--name", name]}
        for name in ("drive", "photos")
    }
    config.write_text(json.dumps({"mcpServers": servers}))

    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--config", str(config)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"drive__who", "photos__who", "drive__screenshot", "media_result"} <= names
            assert texts(await client.call_tool("photos__who", {})) == ["photos"]
            assert texts(await client.call_tool("drive__who", {})) == ["drive"]
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts == {
                f"{server}__{prompt}"
                for server in ("drive", "photos")
                for prompt in ("summarise_drive", "review")
            }
            with pytest.raises(MCPError):  # no upstream of that name
                await client.call_tool("music__who", {})

    run(scenario)


def test_with_workers_late_results_come_from_media_result(cluster: Cluster) -> None:
    cluster.fake.set(reply="Queued summary.", latency=1.0)
    cluster.start_worker("vision", concurrency=2)

    async def scenario() -> None:
        async with proxied(cluster, "--wait", "0", *wrap()) as client:
            status = await client.call_tool("media_status", {})
            assert status.structured_content is not None
            assert status.structured_content["mode"] == "queued"
            result = await client.call_tool("screenshot", {})
            note = texts(result)[-1]
            assert "still running" in note and "media_result" in note
            job_id = note.split(" job ")[1].split(" ")[0]
            for _ in range(200):
                got = await client.call_tool("media_result", {"id": job_id})
                assert got.structured_content is not None
                if got.structured_content["status"] == "done":
                    break
                await anyio.sleep(0.1)
            assert "Queued summary." in texts(got)[0]

    run(scenario)


def test_own_tools_refuse_files_outside_the_allowed_roots(cluster: Cluster, tmp_path: Path) -> None:
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG\r\n\x1a\n not really")

    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            refused = await client.call_tool("describe_image", {"image": str(secret)})
            assert refused.is_error and "not inside an allowed root" in texts(refused)[0]
            unknown = await client.call_tool("describe_image", {"image": "0" * 64})
            assert unknown.is_error and "no cached image" in texts(unknown)[0]

    run(scenario)


SDK1_SERVER = '''
import base64, sys
from mcp.server.fastmcp import FastMCP, Image
server = FastMCP("old-sdk")

@server.tool()
def picture() -> Image:
    """A PNG from an SDK 1.x server."""
    return Image(data=base64.b64decode(sys.argv[1]), format="png")

@server.tool()
def version() -> str:
    import importlib.metadata
    return importlib.metadata.version("mcp")

server.run()
'''


@pytest.fixture(scope="module")
def sdk1_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return venv_with(tmp_path_factory.mktemp("sdk1-venv"), "mcp==1.30.0")


def test_an_sdk_1x_upstream_negotiates_and_its_image_is_rewritten(
    cluster: Cluster, sdk1_python: Path, tmp_path: Path
) -> None:
    from tests.support.factories import png_bytes

    cluster.fake.set(reply="An old picture.")
    script = tmp_path / "old_server.py"
    script.write_text(SDK1_SERVER)
    picture = base64.b64encode(png_bytes()).decode()

    errors = tmp_path / "stderr.log"

    async def scenario() -> None:
        upstream = ["--", str(sdk1_python), str(script), picture]
        with errors.open("w") as errlog:
            async with proxied(
                cluster, "--inline", "--images", "text", *upstream, errlog=errlog
            ) as client:
                assert texts(await client.call_tool("version", {})) == ["1.30.0"]
                result = await client.call_tool("picture", {})
                assert kinds(result) == ["text"]
                assert "An old picture." in texts(result)[0]

    run(scenario)
    # The proxy opens with the handshake: no `server/discover` probe for the old server to
    # log a validation error about (its stderr is the proxy's).
    logged = errors.read_text()
    assert "server/discover" not in logged and "validation error" not in logged.lower(), logged


def test_hostile_upstream_cannot_stop_the_proxy(cluster: Cluster) -> None:
    async def scenario() -> None:
        limit = str(1024 * 1024)
        async with proxied(cluster, "--inline", *wrap(), MCP_MEDIA_MAX_BLOB_BYTES=limit) as client:
            # Never answers: the caller gives up; the proxy keeps serving other calls.
            with pytest.raises(MCPError), anyio.fail_after(60):
                await client.call_tool("hang", {}, read_timeout_seconds=2)
            assert texts(await client.call_tool("who", {})) == ["upstream"]
            # Lines that are not JSON-RPC on the upstream's stdout.
            assert texts(await client.call_tool("garbage", {})) == ["still here"]
            # A block over the cache limit (1 MiB here): forwarded as it came, plus a marker.
            huge = await client.call_tool("huge", {"megabytes": 3})
            assert kinds(huge) == ["image", "text"]
            assert "too large" in texts(huge)[0]
            assert texts(await client.call_tool("who", {})) == ["upstream"]

    run(scenario)


def test_cancellation_reaches_the_upstream(cluster: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"

    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            with anyio.move_on_after(3):
                await client.call_tool("hang_until_cancelled", {"marker": str(marker)})
            with anyio.move_on_after(30):
                while not marker.exists():
                    await anyio.sleep(0.1)
            assert texts(await client.call_tool("who", {})) == ["upstream"]

    run(scenario)
    assert marker.read_text() == "cancelled"


def test_without_a_broker_a_running_job_is_known_to_media_result(cluster: Cluster) -> None:
    cluster.fake.set(reply="Slow inline summary.", latency=1.0)

    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--wait", "0", *wrap()) as client:
            note = texts(await client.call_tool("screenshot", {}))[-1]
            job_id = note.split(" job ")[1].split(" ")[0]
            first = await client.call_tool("media_result", {"id": job_id})
            assert not first.is_error and first.structured_content is not None
            assert first.structured_content["status"] in ("pending", "done")
            for _ in range(300):
                got = await client.call_tool("media_result", {"id": job_id})
                assert got.structured_content is not None
                if got.structured_content["status"] == "done":
                    break
                await anyio.sleep(0.1)
            assert "Slow inline summary." in texts(got)[0]
            result = got.structured_content["result"]
            assert result["meta"]["job_id"] == job_id
            # A finished result answers at once, even with --wait 0.
            again = await client.call_tool("describe_image", {"image": result["sha256"]})
            assert again.structured_content is not None
            assert again.structured_content["summary"] == "Slow inline summary."

    run(scenario)


def test_a_large_embedded_document_becomes_a_link_that_reads_back(cluster: Cluster) -> None:
    from examples.mcp_server import REPORT_PDF

    async def scenario() -> None:
        async with proxied(cluster, "--inline", "--inline-max", "16", *wrap()) as client:
            result = await client.call_tool("report", {})
            assert kinds(result) == ["resource_link", "text"]
            link = result.content[0]
            assert isinstance(link, types.ResourceLink)
            assert str(link.uri).startswith("mcp-media://media/")
            assert link.mime_type == "application/pdf"
            read = await client.read_resource(str(link.uri))
            (blob,) = read.contents
            assert isinstance(blob, types.BlobResourceContents)
            assert base64.b64decode(blob.blob) == REPORT_PDF
            assert blob.mime_type == "application/pdf"

    run(scenario)


def test_an_unreachable_broker_never_loses_the_tool_result(
    cluster: Cluster, tmp_path: Path
) -> None:
    from tests.support.net import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"
    stderr = tmp_path / "proxy.stderr"

    async def scenario() -> None:
        with stderr.open("w") as errlog:
            await use(errlog)

    async def use(errlog: TextIO) -> None:
        async with proxied(cluster, *wrap(), errlog=errlog, MCP_MEDIA_REDIS_URL=dead) as client:
            # A bound on the answer (the broker calls are bounded), not a timing assertion:
            # a door that rides out the outage (~35 s of retries) fails here.
            result = await client.call_tool("screenshot", {}, read_timeout_seconds=15)
            assert not result.is_error
            assert kinds(result) == ["text", "image", "text"]
            assert texts(result)[0] == "Here is the preview."
            note = texts(result)[-1]
            assert "could not process this tool result (broker_unavailable: the broker" in note
            assert "forwarded as the tool returned it" in note
            # Text-only results never needed the broker.
            assert texts(await client.call_tool("who", {})) == ["upstream"]
            # Our own tools need it: the model gets a tool error naming the cause, not a
            # protocol error, and the door goes on serving.
            spoken = await client.call_tool(
                "speak", {"text": "Hello.", "wait": 0}, read_timeout_seconds=15
            )
            assert spoken.is_error
            (said,) = texts(spoken)
            assert said.startswith(
                "speak: the job could not be run (broker_unavailable: the broker"
            )
            assert texts(await client.call_tool("who", {})) == ["upstream"]

    run(scenario)
    logged = stderr.read_text()
    assert "result of screenshot forwarded unprocessed: broker_unavailable" in logged
    assert "tool speak failed: broker_unavailable" in logged


def test_a_broker_that_refuses_writes_is_named_in_tool_errors_and_notes(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Redis refusing writes (MISCONF: it cannot save to its disk) is named as the HTTP door
    names it (broker_cannot_persist), not as a Lua script's error."""
    home = tmp_path / "broker"
    url = ensure_embedded(home).url
    admin = redis.Redis.from_url(url, socket_timeout=5)
    folder = refuse_writes(admin)
    try:
        clip = tmp_path / "clip.wav"
        clip.write_bytes(encode(tone(1.0), 16_000, "wav"))
        audio = cluster.settings().media_cache().store_file(clip, MediaKind.AUDIO)

        async def scenario() -> None:
            async with proxied(cluster, *wrap(), MCP_MEDIA_REDIS_URL=url) as client:
                spoken = await client.call_tool(
                    "speak", {"text": "Hello.", "wait": 0}, read_timeout_seconds=30
                )
                assert spoken.is_error
                (said,) = texts(spoken)
                assert said.startswith("speak: the job could not be run (broker_cannot_persist:")
                assert "cannot save to its disk (Redis MISCONF)" in said, said
                assert f"127.0.0.1:{urlsplit(url).port}/" in said, said  # the broker named
                # Its admission runs a script: Redis wraps the refusal ("Error running script").
                heard = await client.call_tool(
                    "transcribe_audio",
                    {"audio": f"mcp-media://media/{audio.sha256}", "wait": 0},
                    read_timeout_seconds=30,
                )
                assert heard.is_error
                (said,) = texts(heard)
                assert said.startswith("transcribe_audio: the job could not be run (broker_cannot")
                assert "Redis MISCONF" in said, said
                result = await client.call_tool("screenshot", {}, read_timeout_seconds=30)
                assert not result.is_error and kinds(result) == ["text", "image", "text"]
                note = texts(result)[-1]
                assert "could not process this tool result" in note
                assert "broker_cannot_persist" in note and "Redis MISCONF" in note, note

        run(scenario)
    finally:
        take_writes(admin, folder)  # a broker that cannot save refuses to shut down
        admin.close()
        stop_embedded(home)


def test_speak_with_wait_zero_answers_at_once(cluster: Cluster) -> None:
    """No tts worker runs: the job waits in its queue, and `wait: 0` must not wait for it."""

    async def scenario() -> None:
        async with proxied(cluster, *wrap()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            hints = tools["speak"].annotations
            assert hints is not None
            assert hints.read_only_hint is False and hints.destructive_hint is False
            assert hints.idempotent_hint is True and hints.open_world_hint is False
            spoken = await client.call_tool(
                "speak", {"text": "Later, please.", "wait": 0}, read_timeout_seconds=30
            )
            assert not spoken.is_error and spoken.structured_content is not None
            assert spoken.structured_content["status"] == "pending"
            (note,) = texts(spoken)
            assert "still running" in note and "media_result" in note
            later = await client.call_tool("media_result", {"id": spoken.structured_content["id"]})
            assert later.structured_content is not None
            assert later.structured_content["status"] == "pending"
            assert later.structured_content["capability"] == "audio.synthesize"

    run(scenario)


def test_back_off_grows_while_every_call_crashes_and_resets_after_a_success(
    cluster: Cluster,
) -> None:
    """The proxy in this process (to read the delays it computes) in front of a real stdio
    upstream, called by a real client: a server that starts fine but crashes on every call
    is restarted after a growing delay; a call that succeeds starts the back-off over."""
    from workers.doors.mcp.rewriter import DoorOptions
    from workers.doors.mcp.serve import build_proxy
    from workers.doors.mcp.upstream import UpstreamSpec
    from workers.gateways.inline import InlineGateway

    spec = UpstreamSpec(name="up", command=UPSTREAM[0], args=tuple(UPSTREAM[1:]), cwd=str(ROOT))
    settings = cluster.settings()
    proxy = build_proxy(settings, [spec], DoorOptions(inline=True), InlineGateway(settings))

    async def scenario() -> None:
        async with anyio.create_task_group() as tasks:
            await proxy.run_upstreams(tasks)
            async with Client(proxy.server) as client:
                for _ in range(2):
                    crashed = await client.call_tool("crash", {})
                    assert crashed.is_error and "started again" in texts(crashed)[0]
                # This call first waits for the crashed session to be torn down (its delay
                # recorded), then for the back-off, then it succeeds.
                assert texts(await client.call_tool("who", {})) == ["upstream"]
                (peer,) = proxy.peers()  # this client's own upstream sessions
                upstream = peer.upstreams["up"]
                assert list(upstream.retry_delays) == [0.5, 1.0]
                assert (await client.call_tool("crash", {})).is_error
                assert texts(await client.call_tool("who", {})) == ["upstream"]
                assert list(upstream.retry_delays) == [0.5, 1.0, 0.5]
            proxy.stop()
            tasks.cancel_scope.cancel()

    try:
        run(scenario)
    finally:
        proxy.rewriter.close()


def test_lists_follow_the_upstream_cursors(cluster: Cluster) -> None:
    paged = ["--", sys.executable, "-m", "tests.support.paged_upstream"]
    every = [f"_{i}" for i in range(5)]

    async def scenario() -> None:
        async with proxied(cluster, "--inline", *paged) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {f"tool{n}" for n in every} <= tools and "media_result" in tools
            resources = (await client.list_resources()).resources
            assert [r.name for r in resources] == [f"resource{n}" for n in every]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.name for t in templates] == [f"template{n}" for n in every] + ["cached media"]
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == [f"prompt{n}" for n in every]
            assert texts(await client.call_tool("tool_4", {})) == ["tool_4"]

    run(scenario)


def test_resources_templates_and_prompts_of_the_upstream(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["drive://readme"]
            readme = (await client.read_resource("drive://readme")).contents
            assert [c.text for c in readme if isinstance(c, types.TextResourceContents)] == [
                "Reports, screenshots and voice notes."
            ]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [
                "drive://files/{name}",
                "mcp-media://media/{sha256}",  # the cached media, after the upstream's
            ]
            (file,) = (await client.read_resource("drive://files/notes.txt")).contents
            assert isinstance(file, types.TextResourceContents)
            assert file.text == "contents of notes.txt"
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert set(prompts) == {"summarise_drive", "review"}
            arguments = prompts["review"].arguments or []
            assert [(a.name, a.required) for a in arguments] == [("path", True), ("tone", False)]
            plain = await client.get_prompt("summarise_drive")
            (message,) = plain.messages
            assert isinstance(message.content, types.TextContent)
            assert message.content.text == "Summarise what is on the demo drive."
            review = await client.get_prompt("review", {"path": "q3.pdf", "tone": "kind"})
            assert isinstance(review.messages[0].content, types.TextContent)
            assert review.messages[0].content.text == "Review q3.pdf, kind."
            with pytest.raises(MCPError):  # the upstream's own refusal: a missing argument
                await client.get_prompt("review", {})

    run(scenario)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("keep", ["text", "resource", "text"]),
        ("text", ["text", "text"]),
        ("link", ["text", "resource_link", "text"]),
    ],
)
def test_audio_policies_on_an_embedded_audio_blob(
    cluster: Cluster, policy: str, expected: list[str]
) -> None:
    """Queued, no stt worker, --wait 0: the transcript is pending, the policy is what counts."""
    from tests.support.factories import wav_bytes

    async def scenario() -> None:
        async with proxied(cluster, "--wait", "0", "--audio", policy, *wrap()) as client:
            result = await client.call_tool("embedded_audio", {})
            assert kinds(result) == expected
            assert texts(result)[0] == "The clip."
            note = texts(result)[-1].strip("\n")  # our block: on lines of its own
            assert note.startswith("MEDIA:") and note.splitlines()[0].endswith(".wav")
            assert "still running" in note and "media_result" in note
            cached = Path(note.splitlines()[0].removeprefix("MEDIA:"))
            assert cached.read_bytes() == wav_bytes()
            if policy == "keep":
                embedded = result.content[1]
                assert isinstance(embedded, types.EmbeddedResource)
                assert isinstance(embedded.resource, types.BlobResourceContents)
                assert base64.b64decode(embedded.resource.blob) == wav_bytes()
            if policy == "link":
                link = result.content[1]
                assert isinstance(link, types.ResourceLink) and link.mime_type == "audio/wav"
                (blob,) = (await client.read_resource(str(link.uri))).contents
                assert isinstance(blob, types.BlobResourceContents)
                assert base64.b64decode(blob.blob) == wav_bytes()
                assert blob.mime_type == "audio/wav"

    run(scenario)


def test_allowed_root_and_media_uri_inputs_of_own_tools(cluster: Cluster, tmp_path: Path) -> None:
    from tests.support.factories import png_bytes

    cluster.fake.set(reply="A chart of sales.")
    root = tmp_path / "shared"
    root.mkdir()
    (root / "chart.png").write_bytes(png_bytes())

    async def scenario() -> None:
        args = ["--inline", "--allow-root", str(root), *wrap()]
        async with proxied(cluster, *args) as client:
            described = await client.call_tool(
                "describe_image", {"image": str(root / "chart.png"), "wait": 60}
            )
            assert not described.is_error and described.structured_content is not None
            assert described.structured_content["status"] == "done"
            assert described.structured_content["summary"] == "A chart of sales."
            sha = described.structured_content["sha256"]
            again = await client.call_tool("describe_image", {"image": f"mcp-media://media/{sha}"})
            assert again.structured_content is not None
            assert again.structured_content["summary"] == "A chart of sales."
            assert again.structured_content["sha256"] == sha
            outside = await client.call_tool("describe_image", {"image": str(tmp_path / "x.png")})
            assert outside.is_error and "not inside an allowed root" in texts(outside)[0]

    run(scenario)
    assert cluster.fake.request_count == 1  # the second call read the stored result


def test_a_list_changed_notification_reaches_the_client(cluster: Cluster) -> None:
    """The upstream adds a tool and says so; the client, listening to the proxy
    (`subscriptions/listen`, the 2026-07-28 way), hears of it and can call the new tool."""

    async def scenario() -> None:
        async with proxied(cluster, "--inline", *wrap()) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            assert "fresh" not in before
            async with client.listen(tools_list_changed=True) as events:
                assert texts(await client.call_tool("grow", {"name": "fresh"})) == ["added fresh"]
                with anyio.fail_after(60):  # a guard against a hang, not a measure
                    event = await events.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            assert "fresh" in after
            assert texts(await client.call_tool("fresh", {})) == ["fresh was added"]

    run(scenario)


@pytest.fixture
def speech_home(cluster: Cluster, models_home: Path) -> Cluster:
    """The cluster's home sees the prepared speech models."""
    cluster.home.mkdir(parents=True, exist_ok=True)
    (cluster.home / "models").symlink_to(models_home / "models")
    return cluster


@pytest.mark.models
def test_speak_and_transcribe_audio_over_mcp(speech_home: Cluster) -> None:
    """speak gives an Ogg/Opus voice note (AudioContent) and its MEDIA: path; transcribe_audio
    of its mcp-media:// URI gives text, srt, vtt and segments; both declare an output schema
    (which the client checks structuredContent against) and annotations."""
    sentence = "The invoice was paid on Monday."

    async def scenario() -> None:
        async with proxied(speech_home, "--inline", *wrap()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for name in ("speak", "transcribe_audio"):
                assert tools[name].output_schema is not None, name
                assert tools[name].annotations is not None, name
            hints = tools["transcribe_audio"].annotations
            assert hints is not None and hints.read_only_hint is True

            spoken = await client.call_tool("speak", {"text": sentence, "wait": 300})
            assert not spoken.is_error and kinds(spoken) == ["audio", "text"]
            audio = spoken.content[0]
            assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/ogg"
            data = base64.b64decode(audio.data)
            assert data.startswith(b"OggS") and b"OpusHead" in data[:200]
            structured = spoken.structured_content
            assert structured is not None and structured["status"] == "done"
            assert structured["format"] == "ogg" and structured["duration_s"] > 0.5
            path = Path(structured["path"])
            assert f"MEDIA:{path}" in texts(spoken)[0]
            assert path.read_bytes() == data and path.suffix == ".ogg"

            uri = f"mcp-media://media/{path.name.split('.')[0]}"
            shown: dict[str, str] = {}
            for fmt in ("text", "srt", "vtt", "segments"):
                got = await client.call_tool(
                    "transcribe_audio", {"audio": uri, "format": fmt, "wait": 300}
                )
                assert not got.is_error, texts(got)
                assert got.structured_content is not None
                assert got.structured_content["status"] == "done"
                assert "paid on monday" in got.structured_content["text"].lower()
                assert got.structured_content["language"] == "en"
                assert got.structured_content["segments"][0]["start"] == 0.0
                (shown[fmt],) = texts(got)
            assert "paid on monday" in shown["text"].lower()
            assert shown["srt"].startswith("1\n00:00:00,000 --> ")
            assert shown["vtt"].startswith("WEBVTT")
            assert shown["segments"].startswith("[0.00-") and "paid" in shown["segments"]

    run(scenario)


@pytest.mark.models
def test_speak_over_mcp_takes_a_voice_by_name(speech_home: Cluster) -> None:
    """The speak tool's `voice`: each prepared voice by its name, an unknown one refused
    saying where to look."""

    async def scenario() -> None:
        async with proxied(speech_home, "--inline", *wrap()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "voice" in tools["speak"].input_schema["properties"]
            said: dict[str, bytes] = {}
            for voice in ("af_bella", "bf_emma", "af_bella(2)+af_heart"):
                got = await client.call_tool(
                    "speak", {"text": "Good morning.", "voice": voice, "wait": 300}
                )
                assert not got.is_error, texts(got)
                audio = got.content[0]
                assert isinstance(audio, types.AudioContent)
                said[voice] = base64.b64decode(audio.data)
            assert len(set(said.values())) == 3
            refused = await client.call_tool("speak", {"text": "Hi.", "voice": "nobody"})
            assert refused.is_error and "unknown voice 'nobody'" in texts(refused)[0]

    run(scenario)
