"""The answers the stdio door gives before the MCP SDK is loaded are the SDK-backed proxy's
own: its `initialize` result at every protocol version, its `tools/list` of the own tools,
the `initialize` its SDK client sends an upstream; and the front loads no SDK."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.message import SessionMessage
from mcp_types import version as sdk_versions

from workers import version
from workers.core.settings import Settings
from workers.doors.mcp import early_answers
from workers.doors.mcp.rewriter import DoorOptions
from workers.doors.mcp.serve import build_proxy
from workers.doors.mcp.tool_definitions import WIRE
from workers.doors.mcp.tools import DEFINITIONS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ASKED = [*sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS, *sdk_versions.MODERN_PROTOCOL_VERSIONS]


def initialize(asked: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": asked,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


def _no_gateway() -> Any:
    return type("Gateway", (), {"runs_here": True})()  # opened after tools/list, unused


async def sdk_answers(home: Path, asked: str, hidden: frozenset[str]) -> list[dict[str, Any]]:
    """The SDK-backed proxy's answers (no upstream) to initialize and tools/list."""
    settings = Settings.from_env({"MCP_MEDIA_HOME": str(home)})
    proxy = build_proxy(settings, [], DoorOptions(), _no_gateway, hidden_tools=hidden)
    to_server, server_reads = anyio.create_memory_object_stream[Any](10)
    server_writes, from_server = anyio.create_memory_object_stream[Any](10)
    messages = [
        initialize(asked),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    answers = []
    async with (
        to_server,
        server_reads,
        server_writes,
        from_server,
        anyio.create_task_group() as group,
    ):
        await proxy.run_upstreams(group)
        group.start_soon(
            proxy.server.run, server_reads, server_writes, proxy.initialization_options()
        )
        for message in messages:
            await to_server.send(
                SessionMessage(types.jsonrpc_message_adapter.validate_python(message))
            )
            if "id" in message:
                answer = await from_server.receive()
                answers.append(
                    json.loads(answer.message.model_dump_json(by_alias=True, exclude_unset=True))
                )
        group.cancel_scope.cancel()
    await proxy.close()
    return answers


def test_the_front_knows_the_protocol_versions_the_sdk_negotiates() -> None:
    assert early_answers.HANDSHAKE_VERSIONS == sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS
    assert early_answers.LATEST_HANDSHAKE == sdk_versions.LATEST_HANDSHAKE_VERSION


@pytest.mark.parametrize("asked", [*ASKED, "1999-01-01"])
def test_the_early_answers_are_the_proxys_at_every_protocol_version(
    asked: str, tmp_path: Path
) -> None:
    hidden = frozenset({"speak"})
    init, listed = anyio.run(sdk_answers, tmp_path, asked, hidden)
    message = initialize(asked)
    assert early_answers.client_capabilities(message) == {}
    version_now = early_answers.negotiated(asked)
    assert init["result"] == early_answers.initialize_result(version_now, version.current())
    assert listed["result"] == early_answers.tools_result(
        version_now, [], WIRE, hidden, prefixed=False
    )


def test_the_own_tools_wire_json_is_the_sdk_types_serialisation() -> None:
    dumped = [
        tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in DEFINITIONS
    ]
    assert dumped == json.loads(json.dumps(WIRE))


def assert_kept_as_the_sdk_keeps(tool: dict[str, Any]) -> None:
    kept = early_answers.listed_tool(tool)
    assert kept is not None
    assert kept == types.Tool.model_validate(tool, by_name=False).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )


def test_an_upstream_tool_is_kept_as_the_sdk_types_keep_it() -> None:
    tool = {
        "name": "ping",
        "title": "Ping",
        "description": None,
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True, "unknownHint": 3, "title": None},
        "_meta": {"a": 1},
        "whatever": [1],
    }
    assert_kept_as_the_sdk_keeps(tool)


@pytest.mark.parametrize(
    "execution",
    [{"taskSupport": "optional"}, {"taskSupport": "forbidden", "other": 1}, {}, None],
)
def test_a_tools_execution_is_kept_as_the_sdk_types_keep_it(execution: Any) -> None:
    tool = {"name": "run", "inputSchema": {"type": "object"}, "execution": execution}
    assert_kept_as_the_sdk_keeps(tool)


@pytest.mark.parametrize(
    "tool",
    [
        {"name": "no_schema"},
        {"name": "task", "inputSchema": {}, "execution": {"taskSupport": "sometimes"}},
        {"name": "task", "inputSchema": {}, "execution": {"taskSupport": True}},
        {"name": "task", "inputSchema": {}, "execution": "optional"},
        {"name": 3, "inputSchema": {}},
        {"name": "icons", "inputSchema": {}, "icons": [{"src": "x"}]},
        {"name": "hint", "inputSchema": {}, "annotations": {"readOnlyHint": "yes"}},
    ],
)
def test_a_tool_the_front_is_unsure_of_is_left_to_the_sdk(tool: dict[str, Any]) -> None:
    assert early_answers.listed_tool(tool) is None
    assert (
        early_answers.tools_result(
            "2025-06-18", [("up", [tool])], WIRE, frozenset(), prefixed=False
        )
        is None
    )


def test_upstream_tools_come_first_by_public_name_then_own_tools_not_taken() -> None:
    up = [{"name": "speak", "inputSchema": {"type": "object"}}]
    result = early_answers.tools_result(
        "2025-06-18", [("a", up), ("b", [])], WIRE, frozenset(), prefixed=True
    )
    assert result is not None
    names = [tool["name"] for tool in result["tools"]]
    assert names[0] == "a__speak" and "speak" in names
    alone = early_answers.tools_result("2025-06-18", [("a", up)], WIRE, frozenset(), prefixed=False)
    assert alone is not None
    assert [tool["name"] for tool in alone["tools"]].count("speak") == 1


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover"},
        {**initialize("2025-06-18"), "params": {**initialize("2025-06-18")["params"], "_meta": {}}},
        {**initialize("2025-06-18"), "params": {"protocolVersion": "2025-06-18"}},
    ],
)
def test_a_first_message_the_front_is_unsure_of_goes_to_the_sdk(message: dict[str, Any]) -> None:
    assert early_answers.client_capabilities(message) is None


async def sdk_client_initialize(**callbacks: Any) -> dict[str, Any]:
    """The `initialize` request the SDK's client sends an upstream."""
    to_client, client_reads = anyio.create_memory_object_stream[Any](10)
    client_writes, from_client = anyio.create_memory_object_stream[Any](10)

    @asynccontextmanager
    async def transport() -> AsyncIterator[tuple[Any, Any]]:
        yield client_reads, client_writes

    async def run() -> None:
        async with Client(transport(), mode="legacy", **callbacks):
            pass

    async with (
        to_client,
        client_reads,
        client_writes,
        from_client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(run)
        sent: SessionMessage = await from_client.receive()
        group.cancel_scope.cancel()
    dumped: dict[str, Any] = json.loads(
        sent.message.model_dump_json(by_alias=True, exclude_unset=True)
    )
    return dumped


async def _answer(*_: Any) -> Any:
    return None


@pytest.mark.parametrize(
    ("declared", "callbacks"),
    [
        ({}, {}),
        (
            {"sampling": {}},
            {"sampling_callback": _answer, "sampling_capabilities": types.SamplingCapability()},
        ),
        ({"elicitation": {}}, {"elicitation_callback": _answer}),
        ({"roots": {"listChanged": True}}, {"list_roots_callback": _answer}),
    ],
)
def test_the_upstream_initialize_is_the_one_the_sdk_client_sends(
    declared: dict[str, Any], callbacks: dict[str, Any]
) -> None:
    sent = anyio.run(lambda: sdk_client_initialize(**callbacks))
    assert sent["method"] == "initialize"
    assert sent["params"] == early_answers.upstream_initialize(declared)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_front_loads_no_mcp_sdk_and_no_pydantic() -> None:
    """Every module the early front imports, followed through the project's own."""
    seen: set[str] = set()
    todo = ["workers.doors.mcp.early_front", "workers.doors.mcp.early_answers"]
    outside: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = ROOT / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / module.replace(".", "/") / "__init__.py"
        if not path.exists():
            outside.add(module.split(".")[0])
            continue
        parents = [module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)]
        todo += parents
        todo += [name for name in _imports(path) if name.split(".")[0] in ("workers", "pipelines")]
        outside |= {name.split(".")[0] for name in _imports(path)}
    assert not outside & {"mcp", "mcp_types", "pydantic", "pydantic_settings", "httpx"}, outside


def test_under_the_tasks_revision_only_a_required_task_stays_required() -> None:
    """As the SDK-backed door says: any call runs as a task, so every tool takes one."""
    listed = [
        {"name": "research", "inputSchema": {}, "execution": {"taskSupport": "required"}},
        {"name": "echo", "inputSchema": {}, "execution": {"taskSupport": "forbidden"}},
        {"name": "plain", "inputSchema": {}},
    ]
    found = early_answers.tools_result(
        early_answers.TASKS_VERSION, [("up", listed)], WIRE, frozenset(), prefixed=False
    )
    assert found is not None
    support = {tool["name"]: tool["execution"]["taskSupport"] for tool in found["tools"]}
    assert support["research"] == "required"
    assert support["echo"] == support["plain"] == support["media_result"] == "optional"
