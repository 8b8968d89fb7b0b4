# mypy: ignore-errors
# (typed against SDK 1.30, which this venv's mypy does not have: ours is 2.3)
"""An SDK 1.30 client using MCP tasks as the 2025-11-25 revision has them
(`session.experimental.call_tool_as_task`, tasks/get, tasks/result, tasks/list,
tasks/cancel), against an MCP server over stdio or streamable HTTP. Run with the python of a
venv holding `mcp==1.30.0` (tests/support/venvs.py), not ours: it imports nothing of ours.

    python sdk1_task_client.py --image PATH [--upstream-tool NAME] \
        (--http URL --token T | -- CMD...)

It prints one JSON object: what the server said at each step (the test judges it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

warnings.simplefilter("ignore")  # the experimental tasks API warns it is deprecated in 2.0


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def state(task: Any) -> dict[str, Any]:
    return json.loads(task.model_dump_json(by_alias=True, exclude_none=True))


@asynccontextmanager
async def session_of(args: argparse.Namespace, seen: list[Any]) -> Any:
    async def message(msg: Any) -> None:
        root = getattr(msg, "root", None)
        if isinstance(root, types.TaskStatusNotification):
            seen.append(state(root.params))

    if args.http:
        headers = {"Authorization": f"Bearer {args.token}"}
        async with (
            streamablehttp_client(args.http, headers=headers) as (read, write, _),
            ClientSession(read, write, message_handler=message) as session,
        ):
            yield session
        return
    params = StdioServerParameters(
        command=args.command[0], args=args.command[1:], env=dict(os.environ), cwd=os.getcwd()
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=message) as session,
    ):
        yield session


async def until_done(session: ClientSession, task_id: str) -> list[dict[str, Any]]:
    seen = []
    with anyio.fail_after(180):
        while True:
            got = state(await session.experimental.get_task(task_id))
            seen.append(got)
            if got["status"] in ("completed", "failed", "cancelled"):
                return seen
            await anyio.sleep(got.get("pollInterval", 1000) / 1000)


async def refused(call: Any) -> dict[str, Any] | None:
    try:
        await call
    except McpError as exc:
        return {"code": exc.error.code, "message": exc.error.message}
    return None


async def scenario(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"status_notifications": []}
    async with session_of(args, out["status_notifications"]) as session:
        init = await session.initialize()
        out["protocol"] = init.protocolVersion
        caps = init.capabilities.tasks
        out["capability"] = caps.model_dump(by_alias=True, exclude_none=True) if caps else None
        tools = (await session.list_tools()).tools
        out["task_support"] = {
            tool.name: tool.execution.taskSupport if tool.execution else None for tool in tools
        }
        # A plain call: the answer, as before.
        out["plain"] = texts(await session.call_tool("describe_image", {"image": args.image}))

        created = await session.experimental.call_tool_as_task(
            "describe_image", {"image": args.image}, ttl=120_000
        )
        out["created"] = state(created.task)
        out["polled"] = await until_done(session, created.task.taskId)
        final = await session.experimental.get_task_result(
            created.task.taskId, types.CallToolResult
        )
        out["result"] = json.loads(final.model_dump_json(by_alias=True, exclude_none=True))

        if args.upstream_tool:
            tool = args.upstream_tool
            passed = await session.experimental.call_tool_as_task(tool, {"topic": "tasks"})
            out["upstream_created"] = state(passed.task)
            out["upstream_polled"] = await until_done(session, passed.task.taskId)
            got = await session.experimental.get_task_result(
                passed.task.taskId, types.CallToolResult
            )
            out["upstream_result"] = texts(got)
            # An upstream tool the upstream cannot run as a task: wrapped in ours.
            wrapped = await session.experimental.call_tool_as_task("echo", {"message": "hi"})
            out["wrapped_polled"] = await until_done(session, wrapped.task.taskId)
            got = await session.experimental.get_task_result(
                wrapped.task.taskId, types.CallToolResult
            )
            out["wrapped_result"] = texts(got)
            out["wrapped"] = wrapped.task.taskId
            stopped = await session.experimental.call_tool_as_task(tool, {"topic": "stop"})
            await anyio.sleep(0.5)
            out["upstream_cancel"] = state(
                await session.experimental.cancel_task(stopped.task.taskId)
            )
            out["upstream_after_cancel"] = state(
                await session.experimental.get_task(stopped.task.taskId)
            )
            out["result_of_cancelled"] = await refused(
                session.experimental.get_task_result(stopped.task.taskId, types.CallToolResult)
            )
            out["cancel_again"] = await refused(
                session.experimental.cancel_task(stopped.task.taskId)
            )
        listed = await session.experimental.list_tasks()
        out["listed"] = [task.taskId for task in listed.tasks]
        out["unknown"] = await refused(session.experimental.get_task("x" * 32))
        out["bad_cursor"] = await refused(session.experimental.list_tasks(cursor="nope"))

        if args.http:  # another HTTP session: the first one's task is not found there
            other_seen: list[Any] = []
            async with session_of(args, other_seen) as other:
                await other.initialize()
                ident = created.task.taskId
                out["other"] = {
                    "get": await refused(other.experimental.get_task(ident)),
                    "result": await refused(
                        other.experimental.get_task_result(ident, types.CallToolResult)
                    ),
                    "cancel": await refused(other.experimental.cancel_task(ident)),
                    "listed": [t.taskId for t in (await other.experimental.list_tasks()).tasks],
                }
        await anyio.sleep(0.5)  # the last status notifications
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", required=True)
    parser.add_argument("--upstream-tool")
    parser.add_argument("--http")
    parser.add_argument("--token")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    print(json.dumps(anyio.run(scenario, args)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
