"""Run one `mcp-media` command in this process under a socket and file guard.

    python -m tests.support.confined_run REPORT.json -- ARGS...

Before anything else is imported, an audit hook records every socket event (name lookups,
connect, bind, sendto) and every file opened for writing, created, renamed or removed
outside $MCP_MEDIA_HOME (bytecode caches aside). Then the real CLI runs ARGS, process
edge (`workers.core.confinement.confine_process`) included. The record goes to REPORT.json.

Native code (onnxruntime's telemetry files) does not pass through the audit hook: the
caller compares the XDG_CACHE_HOME and TMPDIR it gave the process before and after.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_SOCKET_EVENTS = frozenset(
    {
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
    }
)
_MUTATING = frozenset({"os.mkdir", "os.rename", "os.remove", "os.symlink", "os.truncate"})


def main(argv: list[str]) -> int:
    report_file = argv[0]
    args = argv[argv.index("--") + 1 :]
    home = os.path.abspath(os.environ["MCP_MEDIA_HOME"])
    record: dict[str, list[str]] = {"sockets": [], "writes": []}
    active = [True]

    def outside(path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return False
        text = os.path.abspath(os.fsdecode(path))
        return not (text == home or text.startswith(home + os.sep) or "__pycache__" in text)

    def hook(event: str, hook_args: tuple[Any, ...]) -> None:
        if not active[0]:
            return
        if event in _SOCKET_EVENTS:
            record["sockets"].append(f"{event} {hook_args!r}"[:200])
        elif event == "open":
            path, mode, flags = hook_args
            if isinstance(mode, str):
                write = any(c in mode for c in "wax+")
            else:
                write = bool((flags or 0) & _WRITE)
            if write and outside(path):
                record["writes"].append(f"open {path}")
        elif event in _MUTATING and hook_args and outside(hook_args[0]):
            record["writes"].append(f"{event} {hook_args[0]}")

    sys.addaudithook(hook)

    from workers.cli.main import main as cli_main

    try:
        code = cli_main(args)
    finally:
        active[0] = False
        with open(report_file, "w", encoding="utf-8") as out:
            json.dump(record, out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
