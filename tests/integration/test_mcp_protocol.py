"""The MCP door as a transparent proxy, checked against a server nobody here wrote: the npm
`@modelcontextprotocol/server-everything` (installed by `make upstreams`), behind a real
`mcp-media proxy` process, with the official SDK client in the handshake era (the era in
which servers may ask the client for sampling, elicitation and roots)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_mcp_http import INITIALIZE, mcp_door, mcp_door_process
from tests.integration.test_mcp_proxy import UPSTREAM, texts

pytestmark = [
    pytest.mark.integration,
    # logging, roots, sampling and resources/subscribe: deprecated at 2026-07-28, used here
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

EVERYTHING = (
    ROOT / "tests/support/upstreams/node_modules/@modelcontextprotocol/server-everything/dist"
)
UPSTREAM_EVERYTHING = ["node", str(EVERYTHING / "index.js"), "stdio"]
# The same, deaf to SIGTERM: stopping it takes SIGKILL.
STUBBORN = ["node", str(ROOT / "tests/support/upstreams/stubborn.mjs"), "stdio"]


class Seen:
    """What the upstream, through the proxy, asked of and told the client."""

    def __init__(self) -> None:
        self.notifications: list[Any] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[Any] = []

    async def message(self, message: Any) -> None:
        if not isinstance(message, Exception):
            self.notifications.append(message)

    def methods(self, method: str) -> list[Any]:
        return [n for n in self.notifications if getattr(n, "method", None) == method]

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def sampling(self, ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        self.sampled.append(params)
        reply = types.TextContent(type="text", text="sampled by the client")
        return types.CreateMessageResult(role="assistant", content=reply, model="test-model")

    async def elicitation(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.elicited.append(params)
        return types.ElicitResult(action="decline")

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root.model_validate({"uri": "file:///srv/project", "name": "project"})]
        )

    def client(self, target: Any, declare: bool = True) -> Client:
        asks: dict[str, Any] = (
            {
                "sampling_callback": self.sampling,
                "elicitation_callback": self.elicitation,
                "list_roots_callback": self.roots,
            }
            if declare
            else {}
        )
        return Client(
            target,
            mode="legacy",
            read_timeout_seconds=120,
            message_handler=self.message,
            logging_callback=self.log,
            **asks,
        )


def proxy_params(cluster: Cluster, *upstream: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "proxy", "--inline", "--", *upstream],
        env=cluster.env(PYTHONPATH=str(ROOT), **env),
        cwd=str(ROOT),
    )


@asynccontextmanager
async def through_proxy(
    cluster: Cluster,
    seen: Seen,
    *upstream: str,
    declare: bool = True,
    transport: str = "stdio",
    **env: str,
) -> AsyncIterator[Client]:
    """A client of a `mcp-media proxy` in front of `upstream`, over stdio or streamable HTTP."""
    command = upstream or UPSTREAM_EVERYTHING
    if transport == "stdio":
        async with seen.client(proxy_params(cluster, *command, **env), declare) as client:
            yield client
        return
    with mcp_door(cluster, "proxy", "--", *command, **env) as (url, token):
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            seen.client(streamable_http_client(url, http_client=http), declare) as client,
        ):
            yield client


def run(test: Any) -> Any:
    return anyio.run(test)


def upstream_names(tools: list[types.Tool]) -> set[str]:
    own = {"describe_image", "transcribe_audio", "speak", "media_result", "media_status"}
    own |= {"read_document"}
    return {tool.name for tool in tools} - own


def test_a_list_change_reaches_the_client_once_after_many_calls(cluster: Cluster) -> None:
    """k calls, then the upstream says its tools changed: the client hears it once (the
    proxy used to send it again for every earlier request of the session)."""
    seen = Seen()

    async def scenario() -> None:
        async with through_proxy(cluster, seen, *UPSTREAM) as client:
            for _ in range(5):
                assert texts(await client.call_tool("who", {})) == ["upstream"]
            assert texts(await client.call_tool("grow", {"name": "fresh"})) == ["added fresh"]
            for _ in range(3):  # round trips after it: any copy would have arrived
                await client.call_tool("who", {})
            await anyio.sleep(0.5)
        assert len(seen.methods("notifications/tools/list_changed")) == 1

    run(scenario)


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
def test_same_tools_as_direct_and_sampling_roots_logging_pass_through(
    cluster: Cluster, transport: str
) -> None:
    direct_seen, seen = Seen(), Seen()

    async def scenario() -> None:
        direct = StdioServerParameters(command="node", args=UPSTREAM_EVERYTHING[1:])
        async with direct_seen.client(direct) as client:
            direct_tools = upstream_names((await client.list_tools()).tools)
        assert len(direct_tools) == 17
        async with through_proxy(cluster, seen, transport=transport) as client:
            caps = client.session.server_capabilities
            assert caps is not None and caps.logging is not None and caps.completions is not None
            assert caps.tools is not None and caps.tools.list_changed
            assert upstream_names((await client.list_tools()).tools) == direct_tools
            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
            assert "sampled by the client" in texts(sampled)[0]
            assert seen.sampled and "hello" in str(seen.sampled[0].messages)
            rooted = await client.call_tool("get-roots-list", {})
            assert "file:///srv/project" in texts(rooted)[0]
            declined = await client.call_tool("trigger-elicitation-request", {})
            assert "decline" in " ".join(texts(declined)).lower()
            opened = {"url": "https://example.org/consent", "elicitationId": "e-1"}
            await client.call_tool("trigger-url-elicitation", opened)
            form, url = seen.elicited
            assert isinstance(form, types.ElicitRequestFormParams)
            assert isinstance(url, types.ElicitRequestURLParams) and url.elicitation_id == "e-1"
            await client.set_logging_level("debug")
            await client.call_tool("toggle-simulated-logging", {})
            with anyio.fail_after(60):  # a guard against a hang, not a measure
                while not [log for log in seen.logs if log.level not in ("info",)]:
                    await anyio.sleep(0.1)
            relayed = [log for log in seen.logs if log.level != "info"]
            assert relayed[0].data  # at the level it was sent with
            assert any(log.logger == "everything-server" for log in seen.logs)  # its name kept
            completed = await client.complete(
                types.PromptReference(type="ref/prompt", name="completable-prompt"),
                {"name": "department", "value": "Eng"},
            )
            assert completed.completion.values == ["Engineering"]
        hidden = through_proxy(cluster, Seen(), declare=False, transport=transport)
        async with hidden as client:  # what the client cannot answer is hidden from it
            names = upstream_names((await client.list_tools()).tools)
            assert "trigger-sampling-request" not in names and "get-roots-list" not in names
            assert "echo" in names

    run(scenario)


def test_the_reference_servers_tiny_image_is_cached_though_a_chunk_fails_its_checksum(
    cluster: Cluster,
) -> None:
    """server-everything's `get-tiny-image` is a PNG whose iCCP chunk fails its CRC, which
    viewers ignore (libpng drops the chunk): it was refused as not an image."""
    seen = Seen()

    async def scenario() -> None:
        async with through_proxy(cluster, seen) as client:
            result = await client.call_tool("get-tiny-image", {})
        said = "\n".join(texts(result))
        assert "not available" not in said, said
        assert "MEDIA:" in said, said
        assert any(isinstance(block, types.ImageContent) for block in result.content)

    run(scenario)


@TRANSPORTS
def test_resource_subscriptions_pass_through(cluster: Cluster, transport: str) -> None:
    seen = Seen()

    async def scenario() -> None:
        async with through_proxy(cluster, seen, transport=transport) as client:
            resources = (await client.list_resources()).resources
            uri = str(resources[0].uri)
            await client.subscribe_resource(uri)
            await client.call_tool("toggle-subscriber-updates", {})
            with anyio.fail_after(60):  # a guard against a hang, not a measure
                while not seen.methods("notifications/resources/updated"):
                    await anyio.sleep(0.1)
            (updated, *_) = seen.methods("notifications/resources/updated")
            assert str(updated.params.uri) == uri
            await client.unsubscribe_resource(uri)

    run(scenario)


def test_the_upstream_gets_the_users_environment(cluster: Cluster) -> None:
    seen = Seen()

    async def scenario() -> dict[str, str]:
        async with through_proxy(cluster, seen, MARK_FOR_TEST="kept") as client:
            listed = await client.call_tool("get-env", {})
            env: dict[str, str] = json.loads(texts(listed)[0])
            return env

    env = run(scenario)
    assert env["MARK_FOR_TEST"] == "kept"
    home = str(cluster.home)
    assert not any(str(value).startswith(home) for value in env.values()), env
    assert "ORT_DISABLE_TELEMETRY" not in env
    assert not any(name.startswith("MCP_MEDIA_") for name in env)


def _pids_marked(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"UPSTREAM_MARK={mark}".encode() in environ.split(b"\0") and cmdline.split(b"\0")[
            0
        ].endswith(b"node"):
            found.append(int(entry.name))
    return found


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True


def test_no_upstream_outlives_a_client_closing_the_proxy(cluster: Cluster) -> None:
    """The SDK client closes the proxy (stdin closed, SIGTERM 2 s later): an upstream kept
    alive past its stdin's end by a timer that writes nothing (resource updates, with no
    subscription), and deaf to SIGTERM, is killed before the proxy exits."""
    mark = uuid.uuid4().hex
    seen = Seen()

    async def scenario() -> list[int]:
        async with through_proxy(cluster, seen, *STUBBORN, UPSTREAM_MARK=mark) as client:
            await client.call_tool("toggle-subscriber-updates", {})
            pids = _pids_marked(mark)
            assert len(pids) == 1
            return pids

    pids = run(scenario)
    # The client waited for the proxy to exit; the proxy, for its upstream (the old code
    # left it running, its parent init).
    assert _alive(pids) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_upstream_before_the_proxy_exits(cluster: Cluster, signum: int) -> None:
    mark = uuid.uuid4().hex
    params = proxy_params(cluster, *UPSTREAM_EVERYTHING, UPSTREAM_MARK=mark)
    proc = subprocess.Popen(
        [params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for message in (
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    for _ in range(2):
        proc.stdout.readline()  # the two answers: the upstream is up
    pids = _pids_marked(mark)
    assert len(pids) == 1
    started = time.monotonic()
    proc.send_signal(signum)
    code = proc.wait(timeout=30)
    took = time.monotonic() - started
    proc.stdin.close()
    proc.stdout.close()
    print(f"proxy exited {code} {took:.2f} s after {signal.Signals(signum).name}")
    assert _alive(pids) == []  # already gone when the proxy exits: it waited for it


def test_a_call_in_flight_over_http_is_answered_when_the_proxy_is_stopped(
    cluster: Cluster,
) -> None:
    """SIGTERM while an upstream call runs: the upstream is stopped at once and the call ends
    with its error answer (uvicorn waited for the call to finish, 19 s of a 20 s one, and its
    client then got no answer at all)."""
    mark = uuid.uuid4().hex
    seen = Seen()
    with mcp_door_process(cluster, "proxy", "--", *UPSTREAM_EVERYTHING, UPSTREAM_MARK=mark) as (
        url,
        token,
        proc,
    ):

        async def scenario() -> Any:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=120) as http,
                seen.client(streamable_http_client(url, http_client=http)) as client,
                anyio.create_task_group() as tasks,
            ):
                outcome: list[Any] = []
                running = anyio.Event()

                async def progressed(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    running.set()

                async def call() -> None:
                    arguments = {"duration": 300, "steps": 300}
                    try:
                        outcome.append(
                            await client.call_tool(
                                "trigger-long-running-operation",
                                arguments,
                                progress_callback=progressed,
                            )
                        )
                    except Exception as exc:  # what the client got is the subject
                        outcome.append(exc)

                tasks.start_soon(call)
                with anyio.fail_after(60):  # a guard against a hang, not a measure
                    await running.wait()
                pids.extend(_pids_marked(mark))
                proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(60):
                    while not outcome:
                        await anyio.sleep(0.1)
                return outcome[0]

        pids: list[int] = []
        got = run(scenario)
        proc.wait(timeout=60)
    said = " ".join(texts(got)) if isinstance(got, types.CallToolResult) else str(got)
    assert isinstance(got, types.CallToolResult) and got.is_error, said
    assert "stopped" in said, said
    assert pids and _alive(pids) == []


def test_two_http_clients_have_their_own_upstream_sessions(cluster: Cluster) -> None:
    """Each HTTP session gets its own upstream process and session: B cannot list or read
    what A's session made, sampling asks A only, and A's upstream stops when A leaves."""
    data = "data:text/plain;base64,aGVsbG8gZnJvbSBB"
    mark = uuid.uuid4().hex

    async def scenario(url: str, token: str) -> None:
        def http() -> httpx2.AsyncClient:
            return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})

        a_seen, b_seen = Seen(), Seen()
        async with (
            http() as hb,
            b_seen.client(streamable_http_client(url, http_client=hb)) as b,
        ):
            async with (
                http() as ha,
                a_seen.client(streamable_http_client(url, http_client=ha)) as a,
            ):
                assert a.session.server_capabilities is not None
                tools = a.session.server_capabilities.tools
                assert tools is not None and tools.list_changed  # as over stdio
                made = await a.call_tool(
                    "gzip-file-as-resource", {"name": "a-secret.txt.gz", "data": data}
                )
                (link,) = [b for b in made.content if isinstance(b, types.ResourceLink)]
                a_uris = {str(r.uri) for r in (await a.list_resources()).resources}
                b_uris = {str(r.uri) for r in (await b.list_resources()).resources}
                assert str(link.uri) in a_uris and str(link.uri) not in b_uris
                assert (await a.read_resource(str(link.uri))).contents
                with pytest.raises(Exception):  # noqa: B017 - the upstream's own error
                    await b.read_resource(str(link.uri))
                sampled = await a.call_tool("trigger-sampling-request", {"prompt": "over http"})
                assert "sampled by the client" in texts(sampled)[0]
                assert a_seen.sampled and not b_seen.sampled
                assert len(_pids_marked(mark)) == 2
            with anyio.fail_after(60):  # A ended its session: a guard against a hang
                while len(_pids_marked(mark)) != 1:
                    await anyio.sleep(0.1)
            assert (await b.list_tools()).tools  # B's own session still serves

    with mcp_door(cluster, "proxy", "--", *UPSTREAM_EVERYTHING, UPSTREAM_MARK=mark) as door:
        anyio.run(scenario, *door)
