"""`mcp-media demo` (what `make run` runs): the whole pipeline once, then everything stops.

Prepares the models, starts the embedded broker and one worker per queue, ingests the
bundled sample tool result, waits for its image summary and transcript, speaks a reply to
an Ogg/Opus voice note, prints what the agent would see, then calls the bundled example MCP
server through `mcp-media proxy` with a real MCP client and prints what the model receives,
and stops what it started.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pipelines import ingest
from pipelines.media import Capability, JobRequest
from pipelines.render import pending_line, render_with_jobs
from pipelines.results import Status
from workers.cli.supervisor import Child
from workers.cli.up import start_all, stop_all
from workers.core.settings import Settings
from workers.core.stage_configs import store_request, synthesis_request
from workers.gateways.cluster import MediaClient
from workers.provisioning.models import prepare

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SAMPLE = EXAMPLES / "sample_result.json"
REPLY = "Thanks Dana. I will send the quarterly report to the finance team before Friday."


def _say(text: str) -> None:
    sys.stderr.write(f"mcp-media demo: {text}\n")


def _wait_ready(children: list[Child], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(children)
    while pending and time.monotonic() < deadline:
        for child in list(pending):
            if child.proc.poll() is not None:
                tail = child.written()[-1500:]
                raise RuntimeError(f"worker {child.name} exited at start:\n{tail}")
            if " ready." in child.written():  # this run's line, not an earlier run's
                pending.remove(child)
        time.sleep(0.2)
    if pending:
        raise RuntimeError(f"workers not ready after {timeout:.0f} s: {[c.name for c in pending]}")


def _proxy_leg(settings: Settings, wait: float) -> str:
    """A real MCP client calls the example server through `mcp-media proxy --images text`."""
    import anyio
    import mcp_types as types
    from mcp import Client, StdioServerParameters

    from workers.broker.embedded import broker_url

    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEDIA_")}
    env["MCP_MEDIA_HOME"] = str(settings.home)
    env["MCP_MEDIA_REDIS_URL"] = broker_url(settings.home, settings.redis_url).url
    upstream = [sys.executable, str(EXAMPLES / "mcp_server.py")]
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "workers.cli.main",
            "proxy",
            "--images",
            "text",
            "--wait",
            str(wait),
            "--",
            *upstream,
        ],
        env=env,
    )

    async def call() -> str:
        async with Client(params, read_timeout_seconds=wait + 30) as client:
            result = await client.call_tool("screenshot", {})
        return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))

    t0 = time.monotonic()
    text = anyio.run(call)
    _say(f"proxy leg answered in {time.monotonic() - t0:.1f} s")
    return text


def _start_page(settings: Settings) -> subprocess.Popen[bytes] | None:
    """`mcp-media serve` on a free loopback port: the jobs page, while the demo runs."""
    from workers.broker.embedded import broker_url

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, MCP_MEDIA_HOME=str(settings.home))
    env["MCP_MEDIA_REDIS_URL"] = broker_url(settings.home, settings.redis_url).url
    log = settings.home / "logs" / "serve-demo.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "serve", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            key = (
                "MCP_MEDIA_API__KEY"
                if settings.api.key.get_secret_value()
                else (settings.home / "api-key")
            )
            _say(f"jobs page at http://127.0.0.1:{port}/ while the demo runs (key: {key})")
            return proc
        time.sleep(0.1)
    _say(f"the jobs page did not start; see {log}")
    _stop_page(proc)
    return None


def _stop_page(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def run_demo(settings: Settings, sample: Path = SAMPLE, wait: float = 120.0) -> int:
    started = time.monotonic()
    prepare(settings.home, log=_say)
    spawned = time.monotonic()
    children, broker_started = start_all(settings)
    page = None
    try:
        _wait_ready(children, timeout=300)
        up_s = time.monotonic() - spawned
        _say(f"broker and {len(children)} workers up after {up_s:.1f} s (models ready before)")
        page = _start_page(settings)
        rendered = ingest(sample.read_text(), cache=settings.media_cache(), server="demo-drive")
        trace_id = uuid.uuid4().hex[:16]
        client = MediaClient.connect(settings)
        try:
            t0 = time.monotonic()
            handles = client.submit(rendered.jobs, trace_id=trace_id)
            handles = client.wait(handles, wait)
            _say(f"{len(handles)} jobs finished in {time.monotonic() - t0:.1f} s")
            request = store_request(settings, synthesis_request(REPLY, settings, "ogg"))
            job = JobRequest(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
            (spoken,) = client.wait(client.submit([job], trace_id=trace_id), wait)
        finally:
            client.close()
        print("=== what the agent sees ===")
        print(render_with_jobs(rendered, handles))
        print("=== spoken reply ===")
        if spoken.envelope is not None and spoken.envelope.status is Status.DONE:
            print(spoken.envelope.output["media_tag"])
        else:
            print(pending_line(job.capability.value, spoken.id))
        print("=== through the MCP proxy: what the model receives from the screenshot tool ===")
        proxied = _proxy_leg(settings, wait)
        print(proxied)
        done = (
            all(
                h.envelope is not None and h.envelope.status is Status.DONE
                for h in [*handles, spoken]
            )
            and "[Image summary" in proxied
        )
        _say(
            f"{'done' if done else 'FAILED'} in {time.monotonic() - started:.1f} s "
            f"(trace {trace_id})"
        )
        return 0 if done else 1
    finally:
        _stop_page(page)
        stop_all(settings, children, broker_started, grace=30)
