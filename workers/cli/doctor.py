"""`mcp-media doctor [-- CMD ARGS...]`: what works in this set-up and what to change, in one
screen.

Each part is probed in a thread of its own, all at once, and each has a bound: a host that
does not answer is a line saying so when its bound is up, never a hang (a probe still running
then is left behind; its thread does not keep the process alive). An upstream command, when
given, is started twice as an agent would start it: alone, then behind `mcp-media proxy`,
and both are timed to their first `tools/list` answer. The exit code is 1 only when a line
says FAIL.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Generic, TypeVar

from workers.cli.doctor_probes import (
    broker_facts,
    discovery_timeout,
    dropped_settings,
    hermes_config,
    model_facts,
    one_line,
    proxy_command,
    ready,
    shown,
    store_facts,
    vision_facts,
)
from workers.cli.doctor_verdicts import (
    Finding,
    Ready,
    Verdict,
    Waits,
    exit_code,
    judge_broker,
    judge_models,
    judge_settings,
    judge_store,
    judge_timeouts,
    judge_upstream,
    judge_vision,
    render,
)
from workers.core.settings import Settings

T = TypeVar("T")

PROBE_TIMEOUT = 3.0  # seconds for a host to answer (broker, store, vision endpoint)
SLACK = 2.0  # past a probe's own bound, before its thread is given up on


def add_doctor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=PROBE_TIMEOUT,
        metavar="S",
        help=f"seconds each host may take to answer ({PROBE_TIMEOUT:g})",
    )
    p.add_argument(
        "--upstream-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds the upstream (and the proxy in front of it) may take to list its tools",
    )
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="-- CMD ARGS... of an MCP server to time, alone and behind the proxy",
    )


class _Probe(Generic[T]):
    """One probe in a daemon thread; `result` waits at most until `deadline`."""

    def __init__(self, run: Callable[[], T]) -> None:
        self._run = run
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._target, daemon=True)
        self._thread.start()

    def _target(self) -> None:
        try:
            self._value = self._run()
        except Exception as exc:  # a probe's own bug: a line, never a traceback
            self._error = exc

    def result(self, seconds: float) -> T | str:
        """The value, or a line saying why there is none."""
        self._thread.join(seconds)
        if self._thread.is_alive():
            return f"no answer within {seconds:g} s"
        if self._error is not None:
            return one_line(self._error)
        assert self._value is not None
        return self._value


def _late(topic: str, why: str) -> Finding:
    return Finding(topic, Verdict.FAIL, f"the check did not finish: {why}")


def _judged(topic: str, probe: _Probe[T], judge: Callable[[T], Finding], seconds: float) -> Finding:
    facts = probe.result(seconds)
    return _late(topic, facts) if isinstance(facts, str) else judge(facts)


def _waits(settings: Settings, env: dict[str, str], proxied: Ready | None) -> Waits:
    """Our waits, the proxy's time to its tools (`proxied`: when an upstream was given, its
    timing or why there is none), and hermes' discovery timeout from its config.yaml when
    one sets it."""
    waits = Waits(settings.api.wait)
    if proxied is not None:
        problem = proxied.problem or ("" if proxied.seconds is not None else "not timed")
        waits = replace(waits, proxy_ready=proxied.seconds, proxy_problem=problem)
    config = hermes_config(env)
    read = discovery_timeout(config)
    if read is None:
        return waits
    return replace(waits, discovery=read, discovery_from=str(config))


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    timeout = max(0.1, float(args.timeout))
    upstream_timeout = max(0.1, float(args.upstream_timeout))
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    env = dict(os.environ)
    bound = timeout + SLACK
    models = _Probe(lambda: model_facts(settings))
    broker = _Probe(lambda: broker_facts(settings, timeout))
    store = _Probe(lambda: store_facts(settings, timeout))
    vision = _Probe(lambda: vision_facts(settings, timeout))
    # Alone first, then behind the proxy: one after the other, so neither slows the other.
    upstream = (
        _Probe(
            lambda: (
                ready(command, upstream_timeout, env),
                ready(proxy_command(command), upstream_timeout, env),
            )
        )
        if command
        else None
    )
    findings = [
        judge_settings(dropped_settings(env)),
        _judged("models", models, judge_models, bound),
        _judged("broker", broker, judge_broker, bound),
        _judged("store", store, judge_store, bound),
        _judged("vision", vision, judge_vision, bound),
    ]
    proxied: Ready | None = None
    if upstream is not None:
        timed = upstream.result(2 * upstream_timeout + SLACK)
        if isinstance(timed, str):
            findings.append(_late("upstream", timed))
            proxied = Ready(problem=timed)
        else:
            alone, proxied = timed
            findings += judge_upstream(shown(command), alone, proxied)
            if alone.problem:
                proxied = Ready(problem=alone.problem)
    findings += judge_timeouts(_waits(settings, env, proxied))
    sys.stdout.write(render(findings))
    sys.stdout.flush()
    return exit_code(findings)


__all__ = ["Ready", "add_doctor_flags", "cmd_doctor"]
