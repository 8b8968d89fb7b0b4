"""Run one decode in a forked child under an address-space cap and a wall-clock budget.

The child inherits the loaded Pillow (fork, no re-import), sets `RLIMIT_AS` to its current
size plus the budget and `RLIMIT_CPU` to the time budget, runs the function and writes its
answer back on a pipe: one JSON line and optional raw bytes, never a pickle, so a child
whose decoder was subverted cannot make the parent run code. The parent waits at most the
time budget, then kills the child. Crashes (SIGSEGV in a decoder), memory exhaustion and
timeouts become `DecodeRefused` with a reason; the calling process never pays for them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT_S = 4.0
DEFAULT_ADDRESS_SPACE = 512 * 1024 * 1024
# Smaller decodes (by the header's estimate) run in the calling process: the header limits
# already bound them, and a fork costs more than decoding them (SECURITY.md has figures).
DEFAULT_ISOLATE_ABOVE = 8 * 1024 * 1024
_MAX_REPLY = 64 * 1024 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
# The peak RSS (VmHWM, KiB) the last child reported: for benchmarks, not for decisions.
last_child_peak_kib: list[int] = [0]


@dataclass(frozen=True, slots=True)
class DecodeBudget:
    """Per-decode limits. `isolate=False` runs every decode in the calling process, uncapped;
    otherwise decodes estimated above `isolate_above` bytes run in the capped child."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    address_space: int = DEFAULT_ADDRESS_SPACE  # bytes the child may add to its own size
    isolate: bool = True
    isolate_above: int = DEFAULT_ISOLATE_ABOVE


class DecodeRefused(Exception):
    """The decode was stopped: `reason` is timeout, memory, crashed or error."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class ChildRefusal(Exception):
    """Raised by a decode function to refuse with its own reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# A decode function returns (a JSON-able dict, raw bytes) or raises.
Decode = Callable[[], tuple[dict[str, Any], bytes]]


def run_bounded(
    decode: Decode, budget: DecodeBudget, estimate: int | None = None
) -> tuple[dict[str, Any], bytes]:
    """Run `decode` in the capped child, or in-process when `estimate` (the bytes the header
    says the decoder allocates) is known and small."""
    small = estimate is not None and estimate <= budget.isolate_above
    if not budget.isolate or small:
        try:
            return decode()
        except MemoryError as exc:
            raise DecodeRefused("memory", "decoding ran out of memory") from exc
        except ChildRefusal as exc:
            raise DecodeRefused(exc.reason, exc.message) from exc
        except Exception as exc:
            raise DecodeRefused("error", f"{type(exc).__name__}: {exc}") from exc
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its effects are checked by the parent
        os.close(read_fd)
        _child(decode, budget, write_fd)
    os.close(write_fd)
    try:
        data, timed_out = _read_reply(read_fd, budget.timeout_s)
    finally:
        os.close(read_fd)
    if timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        raise DecodeRefused("timeout", f"decoding took longer than {budget.timeout_s:g} s")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            raise DecodeRefused("timeout", f"decoding used more than {budget.timeout_s:g} s CPU")
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        raise DecodeRefused("crashed", f"the decoder crashed ({name})")
    line, _, raw = data.partition(b"\n")
    try:
        reply = json.loads(line)
    except ValueError:
        raise DecodeRefused("crashed", "the decoder gave no answer") from None
    if not isinstance(reply, dict):
        raise DecodeRefused("crashed", "the decoder gave no answer")
    peak = reply.pop("_peak_kib", 0)
    last_child_peak_kib[0] = peak if isinstance(peak, int) else 0
    if "error" in reply:
        last_child_peak_kib[0] = int(reply.get("_peak_kib") or 0)
        raise DecodeRefused(str(reply.get("reason", "error")), str(reply["error"])[:500])
    return reply, raw


def _read_reply(fd: int, timeout_s: float) -> tuple[bytes, bool]:
    deadline = time.monotonic() + timeout_s
    parts: list[bytes] = []
    size = 0
    poller = select.poll()  # not select(): descriptors above 1023 are fine
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", True
        if not poller.poll(max(1, int(left * 1000))):
            return b"", True
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(parts), False
        size += len(chunk)
        if size > _MAX_REPLY:
            return b"", True
        parts.append(chunk)


def _current_address_space() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``: ten size_t fields, in this order."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
            *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
        )
    ]


def _fresh_allocations() -> None:  # pragma: no cover - runs in the child
    """Make the cap see every allocation of the decode.

    `RLIMIT_AS` counts address space, and memory the parent freed stays mapped in glibc's
    heap: a decode served from it adds nothing to the count (after a process had loaded and
    dropped speech models and a large image, a 147 MB decode fitted under a 16 MiB cap). The
    child takes that free memory first, without touching it (no page is written, so it costs
    no RSS), and sets a fixed mmap threshold, so what the decode allocates comes from new
    mappings the cap counts.
    """
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):  # not glibc >= 2.33: its allocator is left as it is
        return
    mallinfo2.restype = _MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    size = 1 << 30
    for _ in range(256):  # bounded: a fragmented heap is taken in large pieces only
        free = int(mallinfo2().fordblks)
        if free < 64 * 1024:
            return
        size = min(size, free)
        before = free
        if not libc.malloc(size - 64):
            return
        if int(mallinfo2().fordblks) >= before:  # served by a new mapping: try smaller
            size //= 2
            if size < 4096:
                return


def _child(decode: Decode, budget: DecodeBudget, fd: int) -> None:  # pragma: no cover
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        cpu = int(budget.timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        _fresh_allocations()
        limit = _current_address_space() + budget.address_space
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            reply, raw = decode()
            payload = json.dumps({**reply, "_peak_kib": _peak_kib()}).encode() + b"\n" + raw
        except MemoryError:
            payload = _error("memory", "decoding needs more memory than the budget allows")
        except ChildRefusal as exc:
            payload = _error(exc.reason, exc.message)
        except Exception as exc:
            payload = _error("error", f"{type(exc).__name__}: {exc}")
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _error(reason: str, message: str) -> bytes:
    reply = {"error": message[:500], "reason": reason, "_peak_kib": _peak_kib()}
    return json.dumps(reply).encode() + b"\n"


def _peak_kib() -> int:
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
