"""Fault scenarios at the doors, shared by the pytest suite and the soak: `mcp-media up --api`
with HTTP clients (the `openai` client, transcriptions) and an MCP client (`mcp-media mcp`
over stdio, the official SDK) in flight while a worker is SIGKILLed or redis-server is
SIGKILLed. Nobody restarts anything by hand: `up` does.

Every request is counted by its answer:
- completed: a transcription (HTTP 200; an MCP tool result whose status is `done`);
- failed: an error in its protocol's shape (OpenAI error JSON; a JSON-RPC error or a tool
  result marked as an error, or one still pending);
- lost: anything else (a plain-text 500, a dropped connection, no answer within the bound).

`served_again` is measured from the fault to the first fresh transcription answered (a
clip nobody sent before, so a real job ran), sent again and again from the fault on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import anyio
import openai
import redis
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from pipelines.media import MediaKind
from tests.faults.scenarios import Outcome, Spoken, long_clip
from tests.support.cluster import ROOT
from tests.support.up import Up, alive, wait_for
from workers.core.settings import Settings

HTTP_CLIENTS = 2
REQUEST_TIMEOUT = 300.0  # a bound so that a hang counts as lost, never a timing claim
SERVE_AGAIN_TIMEOUT = 300.0
FULL_FOR = 5.0
_STORED = re.compile(r"stored \w+ result for (\S+) \(job ")


def fresh(tag: int, slot: int) -> int:
    """Trailing silence (samples, under a second) that makes a clip of this scenario run
    (`tag`) and place in it (`slot`: 0-2 in flight, 3 on the full disk, 4- the probes) an
    input no earlier one was: a probe answered from a stored result would prove nothing."""
    return 5000 + tag * 16 + slot


@dataclass
class Answer:
    kind: str  # "completed", "failed" (shaped error) or "lost"
    detail: str
    seconds: float


def http_transcribe(up: Up, clip: Path, timeout: float = REQUEST_TIMEOUT) -> Answer:
    started = time.monotonic()
    api = openai.OpenAI(
        base_url=f"http://127.0.0.1:{up.api_port}/v1",
        api_key=(up.home / "api-key").read_text().strip(),
        max_retries=0,
        timeout=timeout,
    )
    try:
        with clip.open("rb") as audio:
            text = api.audio.transcriptions.create(model="whisper-1", file=audio).text
        return Answer("completed", text[:60], time.monotonic() - started)
    except openai.APIStatusError as exc:
        body = exc.body
        shaped = isinstance(body, dict) and {"message", "type"} <= set(body)
        kind = "failed" if shaped else "lost"
        return Answer(kind, f"{exc.status_code} {str(body)[:120]}", time.monotonic() - started)
    except openai.APIError as exc:  # no HTTP answer at all
        return Answer("lost", f"{type(exc).__name__}: {exc}"[:160], time.monotonic() - started)
    finally:
        api.close()


def mcp_transcribe(up: Up, broker_url: str, sha256: str) -> Answer:
    """`transcribe_audio` through `mcp-media mcp`, a stdio server of the same home."""
    started = time.monotonic()
    env = {k: v for k, v in up.env.items() if not k.startswith("MCP_MEDIA_API__")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "workers.cli.main", "mcp"],
        env={**env, "MCP_MEDIA_REDIS_URL": broker_url, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    async def call() -> Answer:
        async with Client(params, read_timeout_seconds=REQUEST_TIMEOUT) as client:
            got = await client.call_tool(
                "transcribe_audio", {"audio": f"mcp-media://media/{sha256}", "wait": 240}
            )
        status = (got.structured_content or {}).get("status")
        kind = "completed" if not got.is_error and status == "done" else "failed"
        said = " ".join(getattr(block, "text", "") for block in got.content)[:100]
        detail = f"tool status={status} error={got.is_error} {said}"
        return Answer(kind, detail, time.monotonic() - started)

    try:
        return anyio.run(call)
    except MCPError as exc:
        return Answer("failed", f"JSON-RPC {exc}"[:160], time.monotonic() - started)
    except Exception as exc:
        return Answer("lost", f"{type(exc).__name__}: {exc}"[:160], time.monotonic() - started)


class InFlight:
    """Requests running in threads; `answers` once every one has ended."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._answers: list[Answer] = []
        self._lock = threading.Lock()

    def send(self, request: Callable[[], Answer]) -> None:
        def run() -> None:
            answer = request()
            with self._lock:
                self._answers.append(answer)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self._threads.append(thread)

    def answers(self) -> list[Answer]:
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT + 60)
        with self._lock:
            answered = list(self._answers)
        missing = len(self._threads) - len(answered)
        return answered + [Answer("lost", "no answer", REQUEST_TIMEOUT)] * missing


def _held(broker_url: str) -> int:
    """Messages handed to a worker and not yet acked (kombu's `unacked` hash)."""
    try:
        with redis.Redis.from_url(broker_url, socket_timeout=2) as client:
            return int(client.hlen("unacked"))
    except redis.RedisError:
        return 0


def _stored_since(up: Up, offsets: dict[Path, int]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for log, start in offsets.items():
        with log.open("rb") as handle:
            handle.seek(start)
            counts.update(_STORED.findall(handle.read().decode(errors="replace")))
    return counts


def _worker_logs(up: Up) -> dict[Path, int]:
    return {log: log.stat().st_size for log in (up.home / "logs").glob("worker-*.log")}


def kill_worker(up: Up, *_: object) -> list[Answer]:
    os.kill(up.children()["stt"], signal.SIGKILL)
    return []


def kill_broker(up: Up, *_: object) -> list[Answer]:
    pid = int((up.home / "redis" / "redis.pid").read_text().strip())
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not alive(pid), 30), f"redis-server {pid} survived SIGKILL"
    return []


def mount_tmpfs(folder: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` on `folder`: None once mounted, else why it could not be
    (it takes root, or CAP_SYS_ADMIN)."""
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "--lazy", str(folder)], check=False)


def _refusing_writes(broker_url: str) -> bool:
    try:
        with redis.Redis.from_url(broker_url, socket_timeout=2) as client:
            client.set("mcp-media-test:probe", "1")
    except redis.ResponseError as exc:
        return "MISCONF" in str(exc)
    except redis.RedisError:
        return False
    return False


def _fill(out: BinaryIO) -> None:
    """Write to `out` until the filesystem has no byte left (a short write, then ENOSPC)."""
    block = b"\0" * (1 << 20)
    with contextlib.suppress(OSError):
        while True:
            out.write(block)


def fill_disk(up: Up, workdir: Path, spoken: Spoken, tag: int) -> list[Answer]:
    """Fill the small filesystem under the home until Redis refuses writes (its AOF cannot
    be written); a transcription sent while it is full; then the space freed. The disk
    stays full FULL_FOR seconds: the fault's length (every idle consumer polls Redis each
    second, so each meets the refusal), not a wait for something. What is freed meanwhile
    (a job in flight that fails on the full disk removes its partial files, Redis a failed
    rewrite's) is filled again at once: once freed, Redis's next AOF write went through and
    it took writes again, and a CI run saw it never refuse within 60 s."""
    broker = up.broker()
    assert broker is not None
    filler = up.home / "filler"
    out = filler.open("wb", buffering=0)
    try:
        _fill(out)
        full = time.monotonic()

        def refused() -> bool:
            _fill(out)
            return _refusing_writes(broker.url)

        assert wait_for(refused, 60), "Redis kept writing"
        clip = long_clip(spoken, 0, workdir / f"full{tag}.wav", 1, salt=fresh(tag, 3))
        answers = [http_transcribe(up, clip)]
        while time.monotonic() - full < FULL_FOR:
            _fill(out)
            time.sleep(0.2)
    finally:
        out.close()
        filler.unlink()
    return answers


def door_fault(
    name: str,
    up: Up,
    spoken: Spoken,
    workdir: Path,
    fault: Callable[[Up, Path, Spoken, int], list[Answer]],
    tag: int = 0,
) -> Outcome:
    """HTTP and MCP transcriptions in flight, `fault` once a worker holds one of them, then
    fresh transcriptions until one is answered; every request's answer counted."""
    broker = up.broker()
    assert broker is not None, "the broker of `up` is not running"
    settings = Settings.from_env({**up.env, "MCP_MEDIA_REDIS_URL": broker.url})
    clips = [
        long_clip(spoken, i, workdir / f"door{tag}-{i}.wav", 3, salt=fresh(tag, i))
        for i in range(HTTP_CLIENTS + 1)
    ]
    mcp_blob = settings.media_cache().store_file(clips[-1], MediaKind.AUDIO)
    offsets = _worker_logs(up)
    said = len(up.text())
    flight = InFlight()
    for clip in clips[:-1]:
        flight.send(functools.partial(http_transcribe, up, clip))
    flight.send(lambda: mcp_transcribe(up, broker.url, mcp_blob.sha256))
    assert wait_for(lambda: _held(broker.url) > 0, 240), "no job reached a worker"
    faulted = time.monotonic()
    during = fault(up, workdir, spoken, tag)
    ended = time.monotonic()  # the fault is over (space freed); a kill is over at once
    probes: list[Answer] = []
    served_again = after_fault = None
    while time.monotonic() - faulted < SERVE_AGAIN_TIMEOUT:
        index = len(probes)
        probe = long_clip(
            spoken, index, workdir / f"probe{tag}-{index}.wav", 1, fresh(tag, 4 + index)
        )
        answer = http_transcribe(up, probe)
        probes.append(answer)
        if answer.kind == "completed":
            served_again = time.monotonic() - faulted
            after_fault = time.monotonic() - ended
            break
        if answer.kind == "lost":
            time.sleep(0.5)  # a refused connection answers at once: do not spin
    answers = flight.answers() + during + probes
    kinds = Counter(answer.kind for answer in answers)
    stored = _stored_since(up, offsets)
    return Outcome(
        scenario=name,
        submitted=len(answers),
        completed=kinds["completed"],
        dead_lettered=0,
        failed=kinds["failed"],
        duplicated=sum(n - 1 for n in stored.values() if n > 1),
        max_latency=max(answer.seconds for answer in answers),
        extra={
            "served_again_s": "never" if served_again is None else round(served_again, 1),
            "fault_lasted_s": round(ended - faulted, 1),
            "served_after_fault_s": "never" if after_fault is None else round(after_fault, 1),
            "probes": len(probes),
            "answers": ";".join(f"{a.kind}:{a.detail}" for a in answers if a.kind != "completed")
            or "all-completed",
            "restarted": up.text()[said:].count("mcp-media: restarted"),
            "seconds": ",".join(f"{a.kind[0]}{a.seconds:.1f}" for a in answers),
        },
    )


def door_worker_kill(up: Up, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    return door_fault("door_worker_kill", up, spoken, workdir, kill_worker, tag)


def door_disk_full(up: Up, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    """The home's filesystem (a 20 MB tmpfs) fills while requests are in flight, until
    Redis refuses writes, and is freed."""
    return door_fault("door_disk_full", up, spoken, workdir, fill_disk, tag)


def door_redis_kill9(up: Up, spoken: Spoken, workdir: Path, tag: int = 0) -> Outcome:
    return door_fault("door_redis_kill9", up, spoken, workdir, kill_broker, tag)
