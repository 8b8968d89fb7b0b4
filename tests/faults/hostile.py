"""Hostile load on the doors: figures, not assertions (what `make hostile` runs).

    python -m tests.faults.hostile [--count 10000] [--concurrency 16] [--out FILE]

Starts, on a fresh home, a real embedded redis-server, `mcp-media serve` and the MCP door
(`mcp-media mcp --http`), then sends `--count` hostile requests of each kind:

- unkeyed_paths: `GET /v1/<8000 random hex>` without a key (serve);
- wrong_logins: `POST /login` with a wrong key, from 64 loopback addresses (serve);
- forged_cookies: the page (`GET /`, `POST /page/pause`) with a random cookie and token (serve);
- mcp_open_delete: MCP `initialize` over HTTP, then `DELETE` of that session (MCP door);
- mcp_open: `initialize`, the session never closed (MCP door);
- deep_json, long_boundary, lone_surrogate: keyed bodies no parser should walk (serve): a
  speech request nested 10,000 deep, a multipart boundary of 10,000 characters, an
  `input` holding a lone surrogate;
- head_1mb, head_10000_fields (serve), mcp_head_1mb (MCP door): request heads on raw sockets,
  one header of 1 MiB, 10,000 tiny ones; each counted by status and error code, or by the
  socket error that lost the answer.

Then a broker outage (`tests/faults/outage.py`): the time `serve` takes to a shaped answer
with its broker stopped and hung, and until it serves again once the broker is back. Then
hostile documents through the digest (`tests/faults/hostile_documents.py`, `--documents`
rounds of each kind): outcomes, the good document after each, RSS before/after, child peak.

Then the Wyoming door (`tests/faults/wyoming_hostile.py`), `--count` connections of each
hostile kind on raw sockets (oversized `payload_length`, bad JSON, an overlong line, an
unknown type, audio past its bound, a connection flood): answers by code, the slowest
answer or close, its memory before and after, and `describe` answered afterwards. Then the
Realtime socket (`tests/faults/realtime_hostile.py`): sessions sending text that is not
JSON, a binary frame, an unknown type, an append past the buffer, and a flood of sessions
past the bound, the same figures, and a session opened afterwards.

For each kind: the count of each status code, requests/s, and the RSS of each door before
and after (VmRSS) with its peak so far (VmHWM). At the end: the size of serve's `/metrics`
and the time to fetch it, and its page gauges. Prints one line per kind and writes the whole
as JSON. Exits 0 whatever the figures (they are for people to read and compare); 2 if a door
died or could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.faults import hostile_documents, outage, realtime_hostile, wyoming_hostile
from tests.integration.test_mcp_http import ACCEPT, INITIALIZE
from tests.support.cluster import ROOT
from tests.support.net import free_port, wait_for_port
from tests.support.raw_http import hostile_heads, parse
from workers.broker.embedded import ensure_embedded, stop_embedded

REPORT = ROOT / "tests" / "faults" / "hostile_last_run.json"
JSON_TYPE = "application/json"
DEEP_JSON = b'{"model": "tts-1", "voice": "alloy", "input": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
LONG_BOUNDARY = "multipart/form-data; boundary=" + "b" * 10_000  # under the head limit
SURROGATE = b'{"model": "tts-1", "voice": "alloy", "input": "\\ud800 hello"}'
LOGIN_SOURCES = 64  # 127.0.1.1 .. 127.0.1.64: loopback accepts any 127/8 source


@dataclass(frozen=True)
class Door:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def memory(self) -> dict[str, float]:
        """VmRSS and VmHWM (peak) of the door's process, in MiB."""
        if self.proc.poll() is not None:
            raise SystemExit(f"{self.name} died (exit {self.proc.returncode}); see {self.log}")
        found: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = round(int(value.split()[0]) / 1024, 1)
        return {"rss_mb": found["VmRSS"], "peak_mb": found["VmHWM"]}


@contextlib.contextmanager
def door(name: str, argv: list[str], port: int, env: dict[str, str], home: Path) -> Iterator[Door]:
    log = home / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_for_port(port, proc, log)
        yield Door(name, f"http://127.0.0.1:{port}", proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


Send = Callable[[int], Awaitable[int | str]]  # request number -> status code


async def hammer(count: int, concurrency: int, send: Send) -> tuple[Counter[str], float]:
    """`count` requests, `concurrency` at a time; status codes (or error names) and seconds."""
    codes: Counter[str] = Counter()
    numbers = iter(range(count))

    async def one_lane() -> None:
        for number in numbers:
            try:
                codes[str(await send(number))] += 1
            except httpx2.HTTPError as exc:
                codes[type(exc).__name__] += 1

    started = time.perf_counter()
    await asyncio.gather(*(one_lane() for _ in range(concurrency)))
    return codes, time.perf_counter() - started


class Kinds:
    """The hostile kinds; each builds its own clients (closed by `close`) and a sender."""

    def __init__(self, serve: str, mcp: str, keys: tuple[str, str], concurrency: int) -> None:
        self.serve, self.mcp, self.concurrency = serve, mcp, concurrency
        self.key, self.token = keys
        self.clients: list[httpx2.AsyncClient] = []

    def all(self) -> dict[str, Callable[[], Send]]:
        return {
            "unkeyed_paths": self.unkeyed_paths,
            "wrong_logins": self.wrong_logins,
            "forged_cookies": self.forged_cookies,
            # The closed sessions first: what each kind leaves behind is then its own.
            "mcp_open_delete": lambda: self.mcp_sessions(delete=True),
            "mcp_open": lambda: self.mcp_sessions(delete=False),
            "deep_json": lambda: self.keyed_body("/v1/audio/speech", DEEP_JSON, JSON_TYPE),
            "long_boundary": lambda: self.keyed_body(
                "/v1/audio/transcriptions", b"--x--\r\n", LONG_BOUNDARY
            ),
            "lone_surrogate": lambda: self.keyed_body("/v1/audio/speech", SURROGATE, JSON_TYPE),
            "head_1mb": lambda: raw_head(self.serve, "header_1mb"),
            "head_10000_fields": lambda: raw_head(self.serve, "headers_10000"),
            "mcp_head_1mb": lambda: raw_head(self.mcp, "header_1mb"),
        }

    def client(self, base: str, source: str | None = None) -> httpx2.AsyncClient:
        limits = httpx2.Limits(max_connections=self.concurrency)
        transport = httpx2.AsyncHTTPTransport(local_address=source, limits=limits)
        made = httpx2.AsyncClient(base_url=base, timeout=60, transport=transport)
        self.clients.append(made)
        return made

    async def close(self) -> None:
        for made in self.clients:
            await made.aclose()
        self.clients.clear()

    def unkeyed_paths(self) -> Send:
        http = self.client(self.serve)

        async def send(_: int) -> int:
            return (await http.get(f"/v1/{secrets.token_hex(4000)}")).status_code

        return send

    def wrong_logins(self) -> Send:
        sources = [self.client(self.serve, f"127.0.1.{i + 1}") for i in range(LOGIN_SOURCES)]

        async def send(number: int) -> int:
            http = sources[number % LOGIN_SOURCES]
            answer = await http.post("/login", data={"key": secrets.token_urlsafe(24)})
            return answer.status_code

        return send

    def forged_cookies(self) -> Send:
        http = self.client(self.serve)

        async def send(number: int) -> int:
            cookie = {"Cookie": f"mcp_media_page={secrets.token_urlsafe(32)}"}
            if number % 2:
                return (await http.get("/", headers=cookie)).status_code
            form = {"queue": "vision", "csrf": secrets.token_urlsafe(32)}
            return (await http.post("/page/pause", data=form, headers=cookie)).status_code

        return send

    def mcp_sessions(self, delete: bool) -> Send:
        http = self.client(self.mcp)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": ACCEPT}

        async def send(_: int) -> str:
            opened = await http.post("/mcp", json=INITIALIZE, headers=headers)
            session = opened.headers.get("mcp-session-id")
            if not delete or opened.status_code != 200 or not session:
                return f"initialize {opened.status_code}"
            closed = await http.delete("/mcp", headers={**headers, "mcp-session-id": session})
            return f"delete {closed.status_code}"

        return send

    def keyed_body(self, route: str, body: bytes, content_type: str) -> Send:
        http = self.client(self.serve)
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": content_type}

        async def send(_: int) -> str:
            answer = await http.post(route, content=body, headers=headers)
            return f"{answer.status_code} {answer.json()['error']['code']}"

        return send


def raw_head(base: str, kind: str) -> Send:
    """A hostile request head (`tests.support.raw_http`) written while the answer is read."""
    port = int(base.rpartition(":")[2])
    request = hostile_heads(b"/mcp")[kind]

    async def send(_: int) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def write() -> None:
            with contextlib.suppress(OSError):
                writer.write(request)
                await writer.drain()

        writing = asyncio.create_task(write())
        try:
            answer = parse(await reader.read(), None)
        except OSError as exc:
            return type(exc).__name__
        finally:
            writing.cancel()
            writer.close()
        if answer.status is None:
            return "no answer"
        body = answer.json()
        code = body["error"]["code"] if "jsonrpc" not in body else body["error"]["data"]["code"]
        return f"{answer.status} {code}"

    return send


async def run_kind(
    kinds: Kinds, make: Callable[[], Send], count: int, concurrency: int
) -> dict[str, object]:
    try:
        codes, seconds = await hammer(count, concurrency, make())
    finally:
        await kinds.close()
    return {
        "requests": count,
        "seconds": round(seconds, 2),
        "requests_per_s": round(count / seconds, 1),
        "codes": dict(sorted(codes.items())),
    }


def scrape(serve: str, key: str) -> dict[str, object]:
    started = time.perf_counter()
    answer = httpx2.get(f"{serve}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=300)
    seconds = time.perf_counter() - started
    gauges = {
        line.split()[0]: float(line.split()[1])
        for line in answer.text.splitlines()
        if line.startswith("mcp_media_page_")
    }
    series = sum(1 for line in answer.text.splitlines() if line.startswith("mcp_media_api_req"))
    return {
        "status": answer.status_code,
        "bytes": len(answer.content),
        "seconds": round(seconds, 3),
        "request_series": series,
        **gauges,
    }


def measure(count: int, concurrency: int, home: Path) -> dict[str, object]:
    broker = ensure_embedded(home)
    key, token = secrets.token_hex(16), secrets.token_hex(16)  # never a leading "-"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env.update(MCP_MEDIA_HOME=str(home), MCP_MEDIA_REDIS_URL=broker.url, MCP_MEDIA_API__KEY=key)
    api_port, mcp_port = free_port(), free_port()
    serve_argv = ["serve", "--port", str(api_port)]
    mcp_argv = ["mcp", "--http", f"127.0.0.1:{mcp_port}", "--token", token]
    report: dict[str, object] = {"count": count, "concurrency": concurrency}
    with (
        door("serve", serve_argv, api_port, env, home) as api,
        door("mcp", mcp_argv, mcp_port, env, home) as mcp,
    ):
        doors = (api, mcp)
        report["metrics_before"] = scrape(api.url, key)
        report["memory_start"] = {d.name: d.memory() for d in doors}
        results: dict[str, object] = {}
        kinds = Kinds(api.url, mcp.url, (key, token), concurrency)
        for name, make in kinds.all().items():
            before = {d.name: d.memory() for d in doors}
            figures = asyncio.run(run_kind(kinds, make, count, concurrency))
            figures["memory_before"] = before
            figures["memory_after"] = {d.name: d.memory() for d in doors}
            results[name] = figures
            print(line(name, figures), flush=True)
        report["kinds"] = results
        report["metrics_after"] = scrape(api.url, key)
        report["memory_end"] = {d.name: d.memory() for d in doors}
        report["broker_outage"] = broker_outage = outage.measure(api.url, key, home)
        for said in outage.lines(broker_outage):
            print(said, flush=True)
        api.memory()  # both doors lived through it
        mcp.memory()
    report["wyoming"] = wyoming = wyoming_hostile.measure(count, concurrency, home / "wyoming")
    for said in wyoming_hostile.lines(wyoming):
        print(said, flush=True)
    report["realtime"] = realtime = realtime_hostile.measure(count, concurrency, home / "realtime")
    for said in realtime_hostile.lines(realtime):
        print(said, flush=True)
    return report


def documents(rounds: int, report: dict[str, object]) -> None:
    report["documents"] = found = hostile_documents.measure(rounds)
    for said in hostile_documents.lines(found):
        print(said, flush=True)


def line(name: str, figures: dict[str, object]) -> str:
    before, after = figures["memory_before"], figures["memory_after"]
    assert isinstance(before, dict) and isinstance(after, dict)
    memory = "  ".join(
        f"{door} rss {before[door]['rss_mb']}->{after[door]['rss_mb']} MiB "
        f"(peak {after[door]['peak_mb']})"
        for door in before
    )
    return (
        f"{name:16} {figures['requests']} in {figures['seconds']} s "
        f"({figures['requests_per_s']}/s) codes {figures['codes']}  {memory}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="requests of each kind")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--out", type=Path, default=REPORT, help="where the JSON goes")
    parser.add_argument("--documents", type=int, default=20, help="rounds of each document")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="mcp-media-hostile-"))
    try:
        report = measure(args.count, args.concurrency, home)
        documents(args.documents, report)
    except (SystemExit, AssertionError) as exc:
        print(f"hostile: {exc}", file=sys.stderr)
        return 2
    finally:
        stop_embedded(home)
        shutil.rmtree(home, ignore_errors=True)
    for moment in ("metrics_before", "metrics_after"):
        print(f"{moment}: {report[moment]}")
    print(f"memory_end: {report['memory_end']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
