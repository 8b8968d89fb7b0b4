"""What `mcp-media up` does when one of its processes dies: start it again after a back-off.

A worker, `serve` or the embedded broker that dies is started again (1 s, then doubling up
to 30 s while it keeps dying; back to 1 s once it ran a minute), the others keep running,
and one line on stderr says what was restarted, how the last one ended and where its log
is. Only SIGINT/SIGTERM to `up` stops everything.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.errors import ConfigError
from workers.broker.embedded import Broker, ensure_embedded, running_embedded
from workers.cli.supervisor import Child

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
STABLE_AFTER = 60.0  # a process that ran this long was healthy: its next restart is quick


@dataclass
class Backoff:
    first: float = FIRST_DELAY
    cap: float = MAX_DELAY
    stable: float = STABLE_AFTER
    current: float = 0.0

    def next(self, ran_for: float) -> float:
        """The wait before starting again a process that ran `ran_for` seconds."""
        if ran_for >= self.stable or not self.current:
            self.current = self.first
        else:
            self.current = min(self.cap, self.current * 2)
        return self.current


def how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with {code}"


def _say(line: str) -> None:
    sys.stderr.write(f"mcp-media: {line}\n")
    sys.stderr.flush()


@dataclass
class Supervised:
    """One child process of `up` and how to start it again."""

    kind: str  # "worker" or "api": how the line names it
    start: Callable[[], Child]
    child: Child
    started_at: float = field(default_factory=time.monotonic)
    backoff: Backoff = field(default_factory=Backoff)
    due: float | None = None  # when a dead child is started again
    ended: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.child.name}" if self.kind == "worker" else self.kind

    def tend(self, now: float) -> None:
        """Notice a death (and schedule the restart), or restart when it is due."""
        if self.due is None:
            code = self.child.proc.poll()
            if code is None:
                return
            ran = now - self.started_at
            self.ended = f"pid {self.child.proc.pid} {how_it_ended(code)} after {ran:.0f} s"
            self.due = now + self.backoff.next(ran)
            return
        if now < self.due:
            return
        previous = self.child
        self.child = self.start()
        self.started_at, self.due = time.monotonic(), None
        _say(
            f"restarted {self.label} as pid {self.child.proc.pid} ({self.ended}); "
            f"log {previous.log}"
        )


@dataclass
class BrokerKeeper:
    """The embedded broker `up` uses: started again (same home, port and password) when it
    is down, whether it died or `mcp-media down` stopped it."""

    home: Path
    broker: Broker
    backoff: Backoff = field(default_factory=Backoff)
    down_since: float | None = None
    due: float = 0.0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def started(self) -> bool:
        return self.broker.started

    def tend(self, now: float) -> bool:
        """True when the broker came back on another port (its clients need the new URL)."""
        if self.down_since is None:
            if running_embedded(self.home) is not None:
                return False
            self.down_since = now
            self.due = now + self.backoff.next(now - self.started_at)
        if now < self.due:
            return False
        try:
            broker = ensure_embedded(self.home)
        except ConfigError as exc:
            self.due = time.monotonic() + self.backoff.next(0.0)
            _say(f"the broker is down and could not be started: {exc}; trying again")
            return False
        moved = broker.url != self.broker.url
        how = "restarted" if broker.started else "found running again"
        _say(
            f"{how} the broker on 127.0.0.1:{broker.port} (embedded, down for "
            f"{now - self.down_since:.0f} s); log {self.home / 'redis' / 'redis.log'}"
        )
        # Once up restarted it, up stops it; one found running again stays someone else's.
        started = broker.started or self.broker.started
        self.broker = Broker(broker.url, broker.pid, broker.port, started)
        self.down_since, self.started_at = None, time.monotonic()
        return moved
