"""The process of a stdio upstream: started in a process group of its own, stopped with all
it left behind; and the ones started before the rest of the door is imported.

Starting an MCP server takes about as long as importing the MCP SDK (a Python server
imports it too): the CLI starts each stdio upstream first (`Prestarted`), and the first
client connection's sessions take those processes instead of starting their own, so the
first `tools/list` waits for the slower of the two, not for both in turn. No MCP SDK here.

Stopping fits in the second or two a client gives the proxy itself (the SDK's own wait is
2 s, then 2 s more): stdin closed, STOP_GRACE for the server to leave, then SIGTERM to its
process group and, KILL_GRACE later, SIGKILL; the process is reaped before we return.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any, TextIO

import anyio
from anyio.abc import Process

from workers.core.confinement import user_environment
from workers.doors.mcp.upstream_specs import UpstreamSpec

log = logging.getLogger("mcp_media.proxy")

STOP_GRACE = 0.5  # after stdin closes, before SIGTERM
KILL_GRACE = 0.5  # after SIGTERM, before SIGKILL
_POLL = 0.01


def spawn_environment(spec: UpstreamSpec) -> dict[str, str]:
    """What an upstream is started with: the environment the user gave us, and its own."""
    return {**user_environment(), **spec.env}


async def spawn(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    errlog: TextIO = sys.stderr,
) -> Process:
    """The upstream's process, in its own process group (its children are stopped with it);
    its stderr goes straight to ours (a file descriptor, nothing buffered here)."""
    return await anyio.open_process(
        [command, *args], env=dict(env), stderr=errlog, cwd=cwd, start_new_session=True
    )


async def _exited(process: Any, within: float) -> bool:
    """Whether the process ended within `within` s (returncode polled: `wait()` would also
    wait for its pipes, which a grandchild may hold)."""
    with anyio.move_on_after(within):
        while process.returncode is None:
            await anyio.sleep(_POLL)
    return process.returncode is not None


def _signal_group(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # its own group (start_new_session): children too


def _group_alive(pid: int) -> bool:
    """Whether anything of the group is left (its leader reaped here if it ended: we exit
    right after, so nobody else waits for it)."""
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def stop_process(process: Any) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the upstream's process group; reap it."""
    await _close(process.stdin)
    if not await _exited(process, STOP_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _exited(process, KILL_GRACE):
            _signal_group(process.pid, signal.SIGKILL)
            if not await _exited(process, KILL_GRACE):
                log.warning("upstream process %d outlived SIGKILL", process.pid)
    if process.returncode is not None:
        _signal_group(process.pid, signal.SIGKILL)  # what it left behind in its group
    await _close(process.stdout)


async def _close(stream: Any) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


class Prestarted:
    """The stdio upstreams' processes started ahead, by upstream name, each taken once."""

    def __init__(self, processes: Mapping[str, Process] | None = None) -> None:
        self._processes = dict(processes or {})
        self._pids = [process.pid for process in self._processes.values()]  # taken or not
        # The early front's handshakes on them (`early_front.UpstreamHandshake`), by name.
        self._handshakes: dict[str, Any] = {}

    @classmethod
    async def start(cls, specs: Sequence[UpstreamSpec]) -> Prestarted:
        """Start every stdio upstream now. One that cannot be started is left to its first
        session, which says why in the usual way (and tries again later)."""
        processes = {}
        for spec in specs:
            if spec.command is None:
                continue
            try:
                processes[spec.name] = await spawn(
                    spec.command, spec.args, spawn_environment(spec), spec.cwd
                )
            except OSError as exc:
                log.info("upstream %s not started ahead: %s", spec.name, exc)
        return cls(processes)

    def take(self, name: str) -> Process | None:
        return self._processes.pop(name, None)

    def peek(self, name: str) -> Process | None:
        return self._processes.get(name)

    def shaking(self, name: str, handshake: Any) -> None:
        """The early front is doing this upstream's handshake on its process."""
        self._handshakes[name] = handshake

    def handshake(self, name: str) -> Any:
        """The early front's handshake on the process `take` gave, if any (taken once)."""
        return self._handshakes.pop(name, None)

    def listed(self) -> dict[str, frozenset[str]]:
        """The tool names each upstream listed in the early front's handshake."""
        return {
            name: frozenset(
                tool["name"]
                for tool in handshake.tools
                if isinstance(tool, dict) and isinstance(tool.get("name"), str)
            )
            for name, handshake in self._handshakes.items()
            if handshake.done.is_set() and handshake.tools is not None
        }

    def stop_now(self) -> None:
        """From a signal handler, before the door handles signals itself (while the first
        answers are given and the SDK loads): every process started here, taken or not, its
        group sent SIGTERM and, KILL_GRACE later, SIGKILL. Then the caller exits."""
        for pid in self._pids:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE
        while time.monotonic() < deadline and any(map(_group_alive, self._pids)):
            time.sleep(_POLL)
        for pid in self._pids:
            _signal_group(pid, signal.SIGKILL)

    async def close(self) -> None:
        """Stop the processes no session took."""
        with anyio.CancelScope(shield=True):
            while self._processes:
                _, process = self._processes.popitem()
                await stop_process(process)
