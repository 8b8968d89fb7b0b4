"""A broker outage seen from `serve`: figures for `make hostile`, not assertions.

Three phases on the door's own embedded broker:
- stopped: redis-server shut down; each request's time to its answer, and the answers;
- hung: redis-server SIGSTOPped (it accepts connections and never answers), the same;
- back: redis-server started again on its port; time until the door stops saying the broker
  is unavailable (with no worker running, a speech request then gets 503 `no_worker`).
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections import Counter
from pathlib import Path

import httpx2

from workers.broker.embedded import ensure_embedded, running_embedded, stop_embedded

SPEECH = {"model": "tts-1", "voice": "alloy", "input": "Is the broker there?"}
CLIENT_TIMEOUT = 60.0  # far past any bound: an answer that takes this long shows as such
BACK_WITHIN = 60.0


def code_of(answer: httpx2.Response) -> str:
    """`<status> <OpenAI error code>`, or `<status> not-shaped` for a body without one."""
    try:
        error = answer.json().get("error") or {}
        code = error.get("code") or answer.json().get("code")
    except ValueError:
        code = None
    return f"{answer.status_code} {code or 'not-shaped'}"


def timed(http: httpx2.Client, route: str) -> tuple[float, str]:
    started = time.perf_counter()
    answer = http.post("/v1/audio/speech", json=SPEECH) if route == "speech" else http.get(route)
    return time.perf_counter() - started, code_of(answer)


def sample(http: httpx2.Client, route: str, count: int) -> dict[str, object]:
    seconds: list[float] = []
    codes: Counter[str] = Counter()
    for _ in range(count):
        took, code = timed(http, route)
        seconds.append(took)
        codes[code] += 1
    return {
        "n": count,
        "min_ms": round(min(seconds) * 1000, 1),
        "median_ms": round(statistics.median(seconds) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
        "codes": dict(codes),
    }


def until_back(http: httpx2.Client) -> dict[str, object]:
    started = time.perf_counter()
    while time.perf_counter() - started < BACK_WITHIN:
        _, code = timed(http, "speech")
        if "broker_" not in code:
            return {"seconds": round(time.perf_counter() - started, 3), "first_answer": code}
        time.sleep(0.02)
    return {"seconds": None, "first_answer": "still unavailable"}


def measure(serve: str, key: str, home: Path, count: int = 20) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {key}"}
    report: dict[str, object] = {}
    with httpx2.Client(base_url=serve, headers=headers, timeout=CLIENT_TIMEOUT) as http:
        stop_embedded(home)
        report["stopped"] = {
            "speech": sample(http, "speech", count),
            "readyz": sample(http, "/readyz", count),
            "healthz": sample(http, "/healthz", count),
        }
        ensure_embedded(home)
        report["back_after_stop"] = until_back(http)
        broker = running_embedded(home)
        assert broker is not None and broker.pid, "the embedded broker did not come back"
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            hung = max(1, count // 4)  # each waits out the read timeout
            report["hung"] = {
                "speech": sample(http, "speech", hung),
                "readyz": sample(http, "/readyz", hung),
            }
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        report["back_after_hang"] = until_back(http)
    return report


def lines(report: dict[str, object]) -> list[str]:
    out = []
    for phase in ("stopped", "hung"):
        routes = report[phase]
        assert isinstance(routes, dict)
        for route, figures in routes.items():
            out.append(
                f"broker {phase:8} {route:8} n={figures['n']} median {figures['median_ms']} ms "
                f"(min {figures['min_ms']}, max {figures['max_ms']}) {figures['codes']}"
            )
    for phase in ("back_after_stop", "back_after_hang"):
        out.append(f"{phase}: {report[phase]}")
    return out
