"""The stdio door's early answers (given before the MCP SDK is loaded) are the SDK-backed
proxy's own: a real `mcp-media proxy` process, raw JSON-RPC lines as a client writes them,
with MCP__EARLY_ANSWERS on and off; real upstream processes (SDK servers, and one that never
answers its handshake)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import ROOT
from tests.integration.test_mcp_protocol import UPSTREAM_EVERYTHING

pytestmark = pytest.mark.integration

TOOLS_UPSTREAM = [sys.executable, "-m", "tests.support.tools_upstream"]
PAGED_UPSTREAM = [sys.executable, "-m", "tests.support.paged_upstream"]
MCP_UPSTREAM = [sys.executable, "-m", "tests.support.mcp_upstream"]
SILENT_UPSTREAM = [sys.executable, "-c", "import time; time.sleep(600)"]
ROOTS_FIRST_UPSTREAM = [sys.executable, "-m", "tests.support.roots_first_upstream"]
EARLY_LINE = "tools/list answered early"
ROOT_DIR = {"uri": "file:///srv/project", "name": "project"}


def initialize(request_id: int, version: str = "2025-06-18") -> dict[str, Any]:
    return {
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


class Door:
    """`mcp-media proxy` over stdio, spoken to in raw JSON-RPC lines."""

    def __init__(self, home: Path, args: list[str], early: bool) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
        env |= {
            "PYTHONPATH": str(ROOT),
            "MCP_MEDIA_HOME": str(home),
            "MCP_MEDIA_LOG_LEVEL": "INFO",
            "MCP_MEDIA_MCP__EARLY_ANSWERS": "true" if early else "false",
        }
        self.errors = home / f"stderr-{early}.log"
        self.errlog = self.errors.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "proxy", "--inline", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            env=env,
            cwd=ROOT,
        )
        self.answers: dict[Any, dict[str, Any]] = {}

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        for message in messages:
            self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: Any) -> dict[str, Any]:
        assert self.process.stdout is not None
        while request_id not in self.answers:
            line = self.process.stdout.readline()
            assert line, f"the door ended: {self.errors.read_text()}"
            message = json.loads(line)
            if message.get("method") == "roots/list":  # as a client with roots answers
                self.send({"id": message["id"], "result": {"roots": [ROOT_DIR]}})
            elif "id" in message and "method" not in message:
                self.answers[message["id"]] = message
        return self.answers.pop(request_id)

    def close(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.errlog.close()
        return self.errors.read_text()


def first_contact(home: Path, args: list[str], early: bool, calls: list[str]) -> dict[str, Any]:
    """initialize, initialized, tools/list, then `calls` (tools/call, no arguments), all
    written at once (the calls reach the door before its SDK is loaded)."""
    door = Door(home, args, early)
    try:
        door.send(initialize(1))
        init = door.answer(1)
        door.send(
            {"method": "notifications/initialized"},
            {"id": 2, "method": "tools/list"},
            *(
                {"id": 10 + i, "method": "tools/call", "params": {"name": name, "arguments": {}}}
                for i, name in enumerate(calls)
            ),
        )
        listed = door.answer(2)
        answers = [door.answer(10 + i) for i in range(len(calls))]
        door.send({"id": 3, "method": "tools/call", "params": {"name": calls[0], "arguments": {}}})
        again = door.answer(3)
    finally:
        log = door.close()
    return {"init": init, "listed": listed, "calls": answers, "again": again, "log": log}


def compared(tmp_path: Path, args: list[str], calls: list[str]) -> dict[str, Any]:
    on = first_contact(tmp_path, args, True, calls)
    off = first_contact(tmp_path, args, False, calls)
    assert on["init"] == off["init"]
    assert on["listed"] == off["listed"]
    assert on["calls"] == off["calls"]
    assert on["again"] == off["again"]
    assert EARLY_LINE in on["log"] and EARLY_LINE not in off["log"]
    assert "WARNING" not in on["log"].replace("WARNING mcp_media.door", "")
    return on


def test_one_upstream_gets_the_same_answers_early_as_from_the_sdk(tmp_path: Path) -> None:
    on = compared(tmp_path, ["--", *TOOLS_UPSTREAM], ["ping", "media_status"])
    names = [tool["name"] for tool in on["listed"]["result"]["tools"]]
    assert names[:4] == ["ping", "screenshot", "expired", "voice"] and "media_result" in names
    assert on["calls"][0]["result"]["content"] == [{"type": "text", "text": "pong"}]
    assert not on["calls"][1]["result"].get("isError")


def test_two_upstreams_one_paged_get_the_same_answers_early(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "tools": {"command": TOOLS_UPSTREAM[0], "args": TOOLS_UPSTREAM[1:]},
        "paged": {"command": PAGED_UPSTREAM[0], "args": PAGED_UPSTREAM[1:]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    on = compared(tmp_path, ["--config", str(config)], ["tools__ping", "paged__tool_4"])
    names = [tool["name"] for tool in on["listed"]["result"]["tools"]]
    assert {"tools__ping", "paged__tool_0", "paged__tool_4", "media_result"} <= set(names)


def test_the_reference_server_whose_tools_say_their_execution_is_answered_early(
    tmp_path: Path,
) -> None:
    """server-everything (the npm reference server): every tool carries `execution`."""
    on = compared(tmp_path, ["--", *UPSTREAM_EVERYTHING], ["get-resource-links"])
    tools = {tool["name"]: tool for tool in on["listed"]["result"]["tools"]}
    assert tools["simulate-research-query"]["execution"] == {"taskSupport": "required"}
    assert tools["echo"]["execution"] == {"taskSupport": "forbidden"}


def test_an_sdk_server_with_rich_tools_gets_the_same_list_either_way(tmp_path: Path) -> None:
    """Titles, output schemas, annotations: whether answered early or left to the SDK."""
    door_on = first_contact(tmp_path, ["--", *MCP_UPSTREAM], True, ["who"])
    door_off = first_contact(tmp_path, ["--", *MCP_UPSTREAM], False, ["who"])
    assert door_on["listed"] == door_off["listed"]
    assert door_on["calls"] == door_off["calls"]


def test_the_tasks_revision_gets_the_same_answers_early(tmp_path: Path) -> None:
    answers = {}
    for early in (True, False):
        door = Door(tmp_path, ["--", *TOOLS_UPSTREAM], early)
        try:
            door.send(initialize(1, "2025-11-25"))
            door.send({"method": "notifications/initialized"}, {"id": 2, "method": "tools/list"})
            answers[early] = (door.answer(1), door.answer(2))
        finally:
            door.close()
    assert answers[True] == answers[False]
    assert all(
        tool["execution"] == {"taskSupport": "optional"}
        for tool in answers[True][1]["result"]["tools"]
    )


def test_an_upstream_that_never_answers_its_handshake_still_lets_the_others_list(
    tmp_path: Path,
) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "tools": {"command": TOOLS_UPSTREAM[0], "args": TOOLS_UPSTREAM[1:]},
        "silent": {"command": SILENT_UPSTREAM[0], "args": SILENT_UPSTREAM[1:]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    door = Door(tmp_path, ["--config", str(config)], early=True)
    try:
        door.send(initialize(1))
        assert door.answer(1)["result"]["serverInfo"]["name"] == "mcp-media"
        door.send({"method": "notifications/initialized"}, {"id": 2, "method": "tools/list"})
        names = {tool["name"] for tool in door.answer(2)["result"]["tools"]}
        assert {"tools__ping", "media_result"} <= names
        assert not any(name.startswith("silent__") for name in names)
        door.send({"id": 3, "method": "tools/call", "params": {"name": "tools__ping"}})
        assert door.answer(3)["result"]["content"] == [{"type": "text", "text": "pong"}]
    finally:
        log = door.close()
    assert EARLY_LINE not in log
    assert "upstream silent" in log


def test_a_first_message_of_another_era_goes_to_the_sdk_unchanged(tmp_path: Path) -> None:
    answers = {}
    for early in (True, False):
        door = Door(tmp_path, ["--", *TOOLS_UPSTREAM], early)
        try:
            door.send({"id": 1, "method": "tools/list"})
            answers[early] = door.answer(1)
        finally:
            log = door.close()
        assert EARLY_LINE not in log
    assert answers[True] == answers[False]


def test_an_upstream_that_asks_the_client_before_listing_is_listed_either_way(
    tmp_path: Path,
) -> None:
    """Its question (roots/list) reaches the client through the SDK session, which takes the
    upstream over from the early front at once: nothing waits on anything else."""
    answers = {}
    for early in (True, False):
        door = Door(tmp_path, ["--", *ROOTS_FIRST_UPSTREAM], early)
        try:
            door.send(initialize(1))
            door.answer(1)
            door.send({"method": "notifications/initialized"}, {"id": 2, "method": "tools/list"})
            listed = door.answer(2)
            door.send({"id": 3, "method": "tools/call", "params": {"name": "where"}})
            answers[early] = (listed, door.answer(3))
        finally:
            log = door.close()
        assert EARLY_LINE not in log
    assert answers[True] == answers[False]
    assert answers[True][1]["result"]["content"] == [
        {"type": "text", "text": "file:///srv/project"}
    ]
