"""`mcp-media mcp --http`: streamable HTTP on loopback with a bearer token, checked with the
official SDK client and plain HTTP requests against a real server process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.conftest import ROOT, Cluster
from tests.support.net import free_port, wait_for_port

pytestmark = pytest.mark.integration
# The door's status in-process: every queue known, nothing admitted.
INLINE_IDLE = {
    "mode": "inline",
    "queues": {q: {"waiting": 0} for q in ("vision", "stt", "tts", "documents")},
}


def refused(response: httpx2.Response, status: int, says: str = "", *, ours: bool = True) -> None:
    """`response` is a refusal with `status` in JSON-RPC's shape: a null id, an error whose
    message says why (containing `says`) and, where the door made it (`ours`), whose data
    carries the status."""
    assert response.status_code == status, (response.status_code, response.text[:200])
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert (answer["jsonrpc"], answer["id"]) == ("2.0", None), answer
    error = answer["error"]
    assert error["code"] == -32600 and (not ours or error["data"]["status"] == status), error
    assert error["message"].strip() and says in error["message"], error


@contextmanager
def mcp_door(
    cluster: Cluster, command: str = "mcp", *upstream: str, **env: str
) -> Iterator[tuple[str, str]]:
    with mcp_door_process(cluster, command, *upstream, **env) as (url, token, _):
        yield url, token


@contextmanager
def mcp_door_process(
    cluster: Cluster, command: str = "mcp", *upstream: str, **env: str
) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """The door's URL, its token and its process."""
    port = free_port()
    log = Path(cluster.home) / "mcp-http.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [command, "--inline", "--http", f"127.0.0.1:{port}", *upstream]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", *argv],
            cwd=ROOT,
            env=cluster.env(**env),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    token_file = Path(cluster.home) / "mcp-token"
    wait_for_port(port, proc, log)
    assert token_file.stat().st_mode & 0o777 == 0o600
    try:
        yield f"http://127.0.0.1:{port}/mcp", token_file.read_text().strip(), proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def http_door(cluster: Cluster) -> Iterator[tuple[str, str]]:
    with mcp_door(cluster) as door:
        yield door


def test_client_with_the_token_lists_and_calls_own_tools(http_door: tuple[str, str]) -> None:
    url, token = http_door

    async def scenario() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            assert client.server_info is not None
            assert client.server_info.name == "mcp-media"
            assert client.server_info.version == version("mcp-media")
            names = {tool.name for tool in (await client.list_tools()).tools}
            # Jobs run here and this home has no models: the speech tools are not offered.
            assert names == {"describe_image", "media_result", "media_status", "read_document"}
            status = await client.call_tool("media_status", {})
            assert status.structured_content == INLINE_IDLE

    anyio.run(scenario)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": "Basic x"}],
)
def test_requests_without_the_token_are_refused(
    http_door: tuple[str, str], headers: dict[str, str]
) -> None:
    url, _ = http_door
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(url, json=body, headers=headers, timeout=10)
    refused(response, 401, "bearer token")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_the_bearer_scheme_is_case_insensitive(http_door: tuple[str, str]) -> None:
    url, token = http_door
    for scheme in ("bearer", "BEARER"):
        headers = {"Authorization": f"{scheme} {token}", "Accept": ACCEPT}
        response = httpx2.post(url, json=INITIALIZE, headers=headers, timeout=10)
        assert response.status_code == 200, (scheme, response.status_code, response.text[:200])


def test_foreign_origin_is_refused(http_door: tuple[str, str]) -> None:
    url, token = http_door
    response = httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Authorization": f"Bearer {token}",
            "Origin": "http://evil.example",
            "Accept": "application/json, text/event-stream",
        },
        timeout=10,
    )
    refused(response, 403, "Origin")


def test_non_loopback_without_a_token_is_refused_at_start(cluster: Cluster) -> None:
    proc = cluster.cli("mcp", "--http", "0.0.0.0:8765", timeout=60)
    assert proc.returncode == 2
    assert "without a token" in proc.stderr


def test_proxy_over_http_aggregates_a_remote_upstream_with_headers(
    cluster: Cluster, http_door: tuple[str, str], tmp_path: Path
) -> None:
    """A remote streamable-HTTP upstream (headers from the config) and a stdio one behind one
    proxy, itself served over streamable HTTP with its own token."""
    url, token = http_door
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "remote": {
                        "url": url,
                        "type": "streamable-http",
                        "headers": {"Authorization": f"Bearer {token}"},
                    },
                    "drive": {
                        "command": sys.executable,
                        "args": ["-m", "tests.support.mcp_upstream", "--name", "drive"],
                    },
                }
            }
        )
    )
    port = free_port()
    proxy_token = "proxy-token-0123456789"
    log = tmp_path / "proxy.log"
    argv = ["proxy", "--inline", "--config", str(config), "--http", f"127.0.0.1:{port}"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", *argv, "--token", proxy_token],
            cwd=ROOT,
            env=cluster.env(PYTHONPATH=str(ROOT)),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)

        async def scenario() -> None:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {proxy_token}"})
            target = f"http://127.0.0.1:{port}/mcp"
            async with http, Client(streamable_http_client(target, http_client=http)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"remote__media_status", "drive__who", "drive__screenshot"} <= names
                status = await client.call_tool("remote__media_status", {})
                assert status.structured_content == INLINE_IDLE
                who = await client.call_tool("drive__who", {})
                assert [b.text for b in who.content if hasattr(b, "text")] == ["drive"]

        anyio.run(scenario)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_busy_port_is_refused_in_one_line(cluster: Cluster) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = cluster.cli("mcp", "--http", f"127.0.0.1:{port}", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "cannot listen" in proc.stderr


TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}


def test_a_loopback_bind_refuses_a_foreign_host(http_door: tuple[str, str]) -> None:
    url, token = http_door
    port = url.split(":")[2].split("/")[0]
    for host in (f"evil.example:{port}", f"192.168.1.20:{port}"):
        response = httpx2.post(
            url,
            json=TOOLS_LIST,
            headers={"Authorization": f"Bearer {token}", "Host": host, "Accept": ACCEPT},
            timeout=10,
        )
        refused(response, 421, "Host")


def test_the_path_with_a_slash_is_served_and_every_path_keeps_the_host_rule(
    http_door: tuple[str, str],
) -> None:
    """`/mcp/` was a 307 with no body to `http://<client's Host>/mcp`, past the Host check,
    and other paths answered a foreign Host with 404."""
    url, token = http_door
    port = url.split(":")[2].split("/")[0]
    sent = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    with httpx2.Client(headers=sent, timeout=10, follow_redirects=False) as http:
        served = http.post(url + "/", json=INITIALIZE)
        assert served.status_code == 200, served.text[:200]
        foreign = {"Host": f"evil.example:{port}"}
        for path in ("/mcp/", "/elsewhere", "/"):
            answer = http.post(url.replace("/mcp", path), json=INITIALIZE, headers=foreign)
            refused(answer, 421, "Host")


def test_a_client_that_leaves_mid_body_leaves_no_traceback(cluster: Cluster) -> None:
    """The SDK logged each such request as an error, with a traceback."""
    with mcp_door_process(cluster) as (url, token, _):
        port = int(url.split(":")[2].split("/")[0])
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 100\r\n\r\n"
        )
        for sent in (head.encode(), head.encode() + b'{"jsonrpc": "2.0"'):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.sendall(sent)
        auth = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
        served = httpx2.post(url, json=INITIALIZE, headers=auth, timeout=10)
        assert served.status_code == 200
    log = (Path(cluster.home) / "mcp-http.log").read_text()
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[-2000:]


def test_a_body_over_the_cap_is_refused(http_door: tuple[str, str]) -> None:
    url, token = http_door
    padding = "x" * (4 * 1024 * 1024 + 1)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_pad": padding}}
    response = httpx2.post(
        url,
        json=body,
        headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT},
        timeout=30,
    )
    refused(response, 413, "too large")


def test_every_refusal_of_the_door_is_a_json_rpc_error(http_door: tuple[str, str]) -> None:
    """What the SDK and Starlette answer in plain text or with no body reaches the client as
    JSON-RPC too: a Content-Type, an Accept header, a method, a path."""
    url, token = http_door
    auth = {"Authorization": f"Bearer {token}"}
    with httpx2.Client(headers=auth, timeout=10) as http:
        text = http.post(
            url,
            content=json.dumps(TOOLS_LIST).encode(),
            headers={"Content-Type": "text/plain", "Accept": ACCEPT},
        )
        refused(text, 400, "Content-Type")
        wrong_accept = http.post(url, json=TOOLS_LIST, headers={"Accept": "text/html"})
        refused(wrong_accept, 406, "Not Acceptable", ours=False)  # the SDK's own, as it came
        refused(http.put(url, json=TOOLS_LIST, headers={"Accept": ACCEPT}), 405, ours=False)
        refused(http.get(url.replace("/mcp", "/elsewhere")), 404)
        # and the door still serves
        served = http.post(url, json=INITIALIZE, headers={"Accept": ACCEPT})
        assert served.status_code == 200, served.text[:200]


def test_a_wildcard_bind_with_a_token_serves_the_machine_addresses(cluster: Cluster) -> None:
    port = free_port()
    token = "wildcard-token-0123456789"
    log = Path(cluster.home) / "mcp-wildcard.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = ["mcp", "--inline", "--http", f"0.0.0.0:{port}", "--token", token]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", *argv],
            cwd=ROOT,
            env=cluster.env(),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)
        url = f"http://127.0.0.1:{port}/mcp"

        async def scenario() -> None:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                status = await client.call_tool("media_status", {})
                assert status.structured_content == INLINE_IDLE

        anyio.run(scenario)

        def post(body: object = INITIALIZE, **headers: str) -> int:
            sent = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, **headers}
            return httpx2.post(url, json=body, headers=sent, timeout=30).status_code

        assert post(Host=f"localhost:{port}") == 200
        assert post(Host="192.0.2.7:9000") == 200  # an address a NAT forwards from
        assert post(Origin=f"http://127.0.0.1:{port}") == 200  # same origin
        assert post(Origin="http://evil.example") == 403
        assert post(Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}") == 421
        padding = "x" * (4 * 1024 * 1024 + 1)
        assert post({**INITIALIZE, "params": {"_pad": padding}}) == 413
        unauthenticated = httpx2.post(url, json=TOOLS_LIST, headers={"Accept": ACCEPT}, timeout=10)
        refused(unauthenticated, 401, "bearer token")
        sent = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
        foreign = httpx2.post(url, json=INITIALIZE, headers={**sent, "Host": "evil.example"})
        refused(foreign, 421, "Host")
        crossed = httpx2.post(
            url, json=INITIALIZE, headers={**sent, "Origin": "http://evil.example"}
        )
        refused(crossed, 403, "Origin")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _open_session(url: str, token: str) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    return httpx2.post(url, json=INITIALIZE, headers=headers, timeout=30)


def test_invalid_ids_get_an_invalid_request_error(http_door: tuple[str, str]) -> None:
    url, token = http_door
    opened = _open_session(url, token)
    session = opened.headers["mcp-session-id"]
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-06-18",
    }
    for bad in ['{"a":1}', "1e999", "[1]", "true", "1.5"]:
        body = f'{{"jsonrpc":"2.0","id":{bad},"method":"tools/list"}}'
        response = httpx2.post(url, content=body, headers=headers, timeout=30)
        assert response.status_code == 400, bad
        answer = response.json()
        assert answer["id"] is None and answer["error"]["code"] == -32600, bad
        assert answer["error"]["data"] == {"status": 400}, bad
    wrong = httpx2.post(url, json={**TOOLS_LIST, "jsonrpc": "1.0"}, headers=headers, timeout=30)
    assert wrong.status_code == 400
    assert wrong.json()["error"]["message"] == 'Invalid Request: "jsonrpc" must be "2.0"'
    listed = httpx2.post(url, json=TOOLS_LIST, headers=headers, timeout=30)
    assert listed.status_code == 200


def test_sessions_are_capped_closed_on_delete_and_after_idling(cluster: Cluster) -> None:
    limits = {"MCP_MEDIA_MCP__MAX_SESSIONS": "3", "MCP_MEDIA_MCP__SESSION_IDLE_TIMEOUT": "2"}
    with mcp_door(cluster, **limits) as (url, token):
        opened = [_open_session(url, token) for _ in range(3)]
        assert [response.status_code for response in opened] == [200, 200, 200]
        full = _open_session(url, token)
        assert full.status_code == 503
        assert full.json()["error"]["message"] == "Too many open sessions"
        # DELETE frees its place at once.
        session = opened[0].headers["mcp-session-id"]
        headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session}
        assert httpx2.delete(url, headers=headers, timeout=30).status_code == 200
        assert _open_session(url, token).status_code == 200
        # Abandoned sessions are closed once idle: places come back without a DELETE.
        give_up = time.monotonic() + 120  # bounds a hang; the idle timeout is 2 s
        answered = _open_session(url, token)
        while answered.status_code == 503 and time.monotonic() < give_up:
            time.sleep(0.5)
            answered = _open_session(url, token)
        assert answered.status_code == 200
        stale = {"Authorization": f"Bearer {token}", "Accept": ACCEPT,
                 "Mcp-Session-Id": opened[1].headers["mcp-session-id"],
                 "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
        assert httpx2.post(url, json=TOOLS_LIST, headers=stale, timeout=30).status_code == 404


def test_a_client_that_disconnects_cancels_the_upstream_call(
    cluster: Cluster, tmp_path: Path
) -> None:
    upstream = ["--", sys.executable, "-m", "tests.support.raw_upstream", str(tmp_path)]
    with mcp_door(cluster, "proxy", *upstream) as (url, token):
        opened = _open_session(url, token)
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": ACCEPT,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-06-18",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx2.post(url, json=initialized, headers=headers, timeout=30)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "silent", "arguments": {}}}  # fmt: skip
        with pytest.raises(httpx2.ReadTimeout):  # the client gives up and hangs up
            httpx2.post(url, json=call, headers=headers, timeout=3)
        give_up = time.monotonic() + 120  # bounds a hang
        while not list(tmp_path.glob("cancelled-*")) and time.monotonic() < give_up:
            time.sleep(0.2)
        assert list(tmp_path.glob("cancelled-*")), "the upstream was never told"
