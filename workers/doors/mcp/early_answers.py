"""The answers the stdio door gives before the MCP SDK is loaded, as the SDK-backed proxy
would give them: the handshake-era `initialize` result, the `initialize` sent to a stdio
upstream, and the first `tools/list`.

Loading the SDK takes about as long as the rest of the start together; an agent lists the
tools at once and some give up within a second or two. These answers are built from plain
JSON (stdlib only), and every one is either the SDK's answer or None ("unsure": the SDK
answers it). The SDK's own lists (protocol versions, what its types keep of a tool) are
copied here; unit tests hold the copies equal to the SDK's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

SERVER_NAME = "mcp-media"
INSTRUCTIONS = (
    "Tool results pass through mcp-media: images and audio come with a MEDIA: path "
    "and, when ready, a summary or transcript; media_result fetches late ones."
)
# The handshake-era revisions the SDK negotiates; an unknown one is answered with the latest.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE = "2025-11-25"
TASKS_VERSION = "2025-11-25"  # the one handshake-era revision with tasks
TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
CAPABILITIES: dict[str, Any] = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}
# What the SDK's client says of itself to an upstream (its default clientInfo).
UPSTREAM_CLIENT_INFO = {"name": "mcp", "version": "0.1.0"}
SEPARATOR = "__"  # `<server>__<name>` with more than one upstream
MAX_PAGES = 100  # pages of an upstream's list followed, against a cursor that never ends
METHOD_NOT_FOUND = -32601

# A tool as the SDK's types keep it (other keys are dropped), each with the type it must be.
TOOL_KEYS: dict[str, type] = {
    "name": str,
    "title": str,
    "description": str,
    "inputSchema": dict,
    "outputSchema": dict,
    "annotations": dict,
    "execution": dict,
    "_meta": dict,
}
# Keys whose value the SDK's types check further than this module does: unsure.
TOOL_KEYS_UNSURE = frozenset({"icons"})
# `execution` keeps only `taskSupport`, one of these (server-everything's tools say it).
TASK_SUPPORT = frozenset({"forbidden", "optional", "required"})
ANNOTATION_KEYS: dict[str, type] = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
_CLIENT_CAPABILITIES = frozenset(
    {"experimental", "roots", "sampling", "elicitation", "tasks", "extensions"}
)


def valid_id(value: Any) -> bool:
    """A JSON-RPC id the SDK can answer: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def is_request(message: Any, method: str) -> bool:
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == method
        and valid_id(message.get("id"))
    )


def is_initialized(message: Any) -> bool:
    """The client's `notifications/initialized`, as plain as the SDK reads it."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == "notifications/initialized"
        and "id" not in message
        and message.get("params") in (None, {})
    )


def is_first_listing(message: Any) -> bool:
    """A `tools/list` for the first page, with no params the answer could depend on."""
    return is_request(message, "tools/list") and message.get("params") in (None, {})


def negotiated(requested: str) -> str:
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


def initialize_result(version: str, server_version: str) -> dict[str, Any]:
    """The proxy's `initialize` result for a negotiated `version`."""
    capabilities = copy.deepcopy(CAPABILITIES)
    if version == TASKS_VERSION:
        capabilities["tasks"] = copy.deepcopy(TASKS_CAPABILITY)
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": SERVER_NAME, "version": server_version},
        "instructions": INSTRUCTIONS,
    }


def client_capabilities(message: Any) -> dict[str, Any] | None:
    """The capabilities of a handshake-era `initialize` the early answer can be given to:
    params as the SDK validates them, no `_meta` (a 2026 envelope); else None."""
    if not is_request(message, "initialize"):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or set(params) - {
        "protocolVersion",
        "capabilities",
        "clientInfo",
    }:
        return None
    capabilities, info = params.get("capabilities"), params.get("clientInfo")
    if not isinstance(params.get("protocolVersion"), str) or not isinstance(capabilities, dict):
        return None
    if not isinstance(info, dict) or not all(
        isinstance(info.get(key), str) for key in ("name", "version")
    ):
        return None
    if not all(
        key in _CLIENT_CAPABILITIES and isinstance(v, dict) for key, v in capabilities.items()
    ):
        return None
    return capabilities


def upstream_initialize(capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `initialize` params the SDK's client sends an upstream for a client that declared
    `capabilities` (it declares what the client declared: `Peer.client_callbacks`); None
    when unsure (a sampling declaration with details)."""
    declared: dict[str, Any] = {}
    if "sampling" in capabilities:
        if capabilities["sampling"]:
            return None
        declared["sampling"] = {}
    if "elicitation" in capabilities:
        declared["elicitation"] = {"form": {}, "url": {}}
    if "roots" in capabilities:
        declared["roots"] = {"listChanged": True}
    return {
        "protocolVersion": LATEST_HANDSHAKE,
        "capabilities": declared,
        "clientInfo": dict(UPSTREAM_CLIENT_INFO),
    }


def listed_tool(tool: Any) -> dict[str, Any] | None:
    """An upstream's tool as the SDK's types keep it, or None when unsure."""
    if not isinstance(tool, dict) or TOOL_KEYS_UNSURE & set(tool):
        return None
    kept: dict[str, Any] = {}
    for key, value in tool.items():
        kind = TOOL_KEYS.get(key)
        if kind is None or value is None:
            continue  # a key the types drop, or a null they leave out
        if not isinstance(value, kind):
            return None
        kept[key] = value
    if not isinstance(kept.get("name"), str) or "inputSchema" not in kept:
        return None
    if "annotations" in kept:
        annotations = {}
        for key, value in kept["annotations"].items():
            kind = ANNOTATION_KEYS.get(key)
            if kind is None or value is None:
                continue
            if type(value) is not kind:
                return None
            annotations[key] = value
        kept["annotations"] = annotations
    if "execution" in kept:
        support = kept["execution"].get("taskSupport")
        if support is not None and (not isinstance(support, str) or support not in TASK_SUPPORT):
            return None
        kept["execution"] = {} if support is None else {"taskSupport": support}
    return kept


def public_name(upstream: str, name: str, prefixed: bool) -> str:
    return f"{upstream}{SEPARATOR}{name}" if prefixed else name


def tools_result(
    version: str,
    listed: Sequence[tuple[str, Sequence[Any]]],
    own: Sequence[Mapping[str, Any]],
    hidden: frozenset[str],
    prefixed: bool,
) -> dict[str, Any] | None:
    """The proxy's `tools/list` result: each upstream's tools (by public name), then the own
    tools not already taken, less the hidden ones; None when unsure of one tool."""
    tools: list[dict[str, Any]] = []
    for upstream, items in listed:
        for item in items:
            tool = listed_tool(item)
            if tool is None:
                return None
            tools.append({**tool, "name": public_name(upstream, tool["name"], prefixed)})
    taken = {tool["name"] for tool in tools}
    tools += [
        copy.deepcopy(dict(tool))
        for tool in own
        if tool["name"] not in hidden and tool["name"] not in taken
    ]
    if version == TASKS_VERSION:  # as `HandshakeTasks.middleware` says of every tool:
        for tool in tools:  # any call runs as a task, so only "required" stays
            execution = tool.setdefault("execution", {})
            if execution.get("taskSupport") != "required":
                execution["taskSupport"] = "optional"
    return {"tools": tools}
