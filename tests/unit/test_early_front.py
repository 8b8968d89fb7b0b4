"""The early front's handover pieces: the client's lines are kept until taken (a wait that
times out loses none), and the SDK session's answer to the `initialize` the front answered
is swallowed once, with a WARNING when it differs."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest

from workers.doors.mcp.early_front import _Queue, _Swallowing

pytestmark = pytest.mark.unit


class Written:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def write(self, text: str) -> None:
        self.texts.append(text)

    async def flush(self) -> None:
        return None


def test_lines_wait_for_their_taker_and_the_end_stays() -> None:
    async def scenario() -> list[Any]:
        queue = _Queue()
        taken: list[Any] = [await queue.take(0.01)]  # nothing yet
        queue.put("a\n")
        queue.put("b\n")
        taken += [await queue.take(0.01), await queue.take()]

        async def late() -> None:
            await anyio.sleep(0.05)
            queue.put("c\n")
            queue.put(None)

        async with anyio.create_task_group() as group:
            group.start_soon(late)
            taken.append(await queue.take())
        taken += [await queue.take(), await queue.take(0.01)]
        return taken

    assert anyio.run(scenario) == [None, "a\n", "b\n", "c\n", None, None]


def line(message: dict[str, Any]) -> str:
    return json.dumps(message) + "\n"


def test_the_sdk_answer_to_the_early_initialize_is_swallowed_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent = {"protocolVersion": "2025-06-18"}
    written = Written()
    writer = _Swallowing(written, 1, sent)
    others = [
        line({"jsonrpc": "2.0", "id": "1", "result": {}}),  # another id (a string)
        line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}),
    ]

    async def scenario() -> None:
        await writer.write(others[0])
        await writer.write(line({"jsonrpc": "2.0", "id": 1, "result": sent}))
        await writer.write(others[1])
        await writer.write(line({"jsonrpc": "2.0", "id": 1, "result": {}}))  # a later id 1

    with caplog.at_level(logging.WARNING):
        anyio.run(scenario)
    assert written.texts == [*others, line({"jsonrpc": "2.0", "id": 1, "result": {}})]
    assert not caplog.records


def test_an_sdk_answer_unlike_the_early_one_is_told(caplog: pytest.LogCaptureFixture) -> None:
    written = Written()
    writer = _Swallowing(written, 7, {"protocolVersion": "2025-06-18"})
    with caplog.at_level(logging.WARNING):
        anyio.run(writer.write, line({"jsonrpc": "2.0", "id": 7, "result": {"other": 1}}))
    assert written.texts == []
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "early answer to initialize" in caplog.records[0].getMessage()
