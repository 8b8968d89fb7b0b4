"""A child process that dies with its parent (Linux's parent-death signal).

`mcp-media up` starts its workers and `serve` in sessions of their own (a Ctrl-C in the
terminal reaches `up` only, which then stops them warmly). Were `up` killed outright (the
OOM killer, SIGKILL), those children would live on with PPID 1, holding their jobs. With a
parent-death signal the kernel ends each child the moment its parent goes; a worker sets
the same on its pool children, so the whole tree goes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Have the kernel send `sig` to this process when its parent (`parent`) exits.

    Called in the child (a preexec_fn, or first thing in a forked process). If the parent
    already died before the call, the signal would never come: exit at once instead."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def dies_with_this_process(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child dies when this process does."""
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)
